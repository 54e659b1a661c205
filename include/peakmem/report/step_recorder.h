// Builds a report's per-step rows and breakdown keys from the numbers a
// model's simulation hands it, statement by statement.
//
// The simulation of a statement is cheap; what the full report wants for it
// (a Step with the statement's op and source text, a breakdown key naming the
// storages the statement made or freed, copied into the report) costs about
// as much again, and none of it feeds back into the simulation. So for a big
// trace the recorder builds the rows on a second thread while the simulation
// goes on: the simulation appends each statement's numbers to a block, and
// full blocks go, in order, to the thread that turns them into rows. On a
// 2-core machine that takes the report off the simulation's critical path.
// Making the rows costs more than simulating (2-3x for the thunder model,
// ~1.7x for the runtime model at 10^6 statements), so the second thread
// would still set the pace: the caller builds one block in every
// `caller_period` itself, into the block (its steps and its own breakdown
// part), and the second thread only appends those in order (see
// docs/scaling.md). The rows, keys and their order are the
// same either way.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "peakmem/report/breakdown_keys.h"
#include "peakmem/report/report.h"
#include "peakmem/report/step_maker.h"
#include "peakmem/ir/trace.h"

namespace peakmem {

class StepRecorder {
 public:
  // Rows go to `report` (steps and/or breakdown, as `options` ask; room for
  // one per statement is reserved here). For a trace of at least
  // kConcurrentStatements, unless options.second_thread is off, on a second
  // thread (if one can be had), the caller building one block in every
  // `caller_period` (0: none; only for a printed trace, whose steps' text
  // views the source).
  // `keys` (kept by the caller) names the breakdown entries.
  StepRecorder(const ParsedTrace& parsed, Report* report, const ReportOptions& options,
               const BreakdownKeys& keys, int caller_period = 0);
  // Stops the second thread (dropping rows not yet built: a model that
  // throws has no report).
  ~StepRecorder();
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  // Statement `index` (called in order, once each): live bytes changed by
  // `delta` to `live`, at most `peak` inside it; `named`: the values for its
  // breakdown entries, with their bytes (> 0 made, < 0 freed), and `style`
  // the model's choice of key for it, both handed to the BreakdownKeys.
  void Record(std::size_t index, std::int64_t delta, std::int64_t live, std::int64_t peak,
              const std::vector<NamedBytes>& named, std::uint8_t style);
  // No more rows: the second thread builds what is left and then sorts out
  // the breakdown's repeated keys (OrderedBreakdown's merge, ~20 ms at 10^6
  // statements) while the caller goes on (the runtime model lists the
  // storages alive at the peak meanwhile). Finish() calls it if needed.
  void EndRows();
  // Waits until every row is built; rethrows what building one threw.
  void Finish();

  // Traces at least this long are worth a second thread.
  static constexpr std::size_t kConcurrentStatements = 50000;

 private:
  struct Row {
    std::int64_t delta;
    std::int64_t live;
    std::int64_t peak;
    std::uint32_t named_end;  // in Block::named
    std::uint8_t style;
  };
  struct Block {
    std::size_t first = 0;  // statement index of rows[0]
    std::vector<Row> rows;
    std::vector<NamedBytes> named;
    // Built by the caller: the rows' steps and breakdown entries, for the
    // second thread to append in order.
    bool built = false;
    std::vector<Step> steps;
    OrderedBreakdown keys;
  };
  // What one thread builds rows with (a StepMaker caches op names, a key is
  // built in a reused string) and where they go.
  struct RowBuilder {
    StepMaker maker;
    std::string key;
    std::vector<Step>* steps = nullptr;
    OrderedBreakdown* breakdown = nullptr;
  };
  static constexpr std::size_t kBlockRows = 8192;
  static constexpr std::size_t kMaxQueuedBlocks = 8;

  StepRecorder(const ParsedTrace& parsed, Report* report, const ReportOptions& options,
               const BreakdownKeys& keys, bool concurrent, int caller_period);
  void Build(RowBuilder& rows, std::size_t index, const Row& row,
             const NamedBytes* named, std::size_t named_count);
  void BuildBlock(RowBuilder& rows, Block& block);
  void BuildBlocks();  // the second thread
  void Hand(std::unique_ptr<Block> block);

  const ParsedTrace& parsed_;
  Report* report_;
  const BreakdownKeys& keys_;
  const bool steps_;
  const bool breakdown_;
  RowBuilder thread_rows_;  // the second thread's (the caller's without one)
  RowBuilder caller_rows_;  // the caller's, for the blocks it builds
  const int caller_period_;
  std::size_t blocks_filled_ = 0;

  // Concurrent mode.
  std::unique_ptr<Block> filling_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Block>> queue_;  // full blocks, in order
  std::vector<std::unique_ptr<Block>> spare_;  // built blocks, for reuse
  bool done_ = false;                          // no more blocks will come
  bool stop_ = false;                          // drop what is queued
  bool ended_ = false;                         // EndRows was called (this thread only)
  std::exception_ptr failure_;
  std::thread builder_;
};

}  // namespace peakmem
