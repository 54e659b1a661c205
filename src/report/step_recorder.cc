#include "peakmem/report/step_recorder.h"

#include <system_error>

namespace peakmem {

namespace {

// Reserves room for the report's rows (one step and at most one key per
// statement, mostly) and says whether building them is worth a second thread.
bool ReserveRowsAndChooseThread(const ParsedTrace& parsed, Report* report,
                                const ReportOptions& options) {
  const std::size_t n = parsed.trace.statements.size();
  if (options.steps) report->steps.reserve(n);
  if (options.breakdown) report->breakdown.Reserve(n);
  return (options.steps || options.breakdown) && options.second_thread &&
         n >= StepRecorder::kConcurrentStatements;
}

}  // namespace

StepRecorder::StepRecorder(const ParsedTrace& parsed, Report* report, const ReportOptions& options,
                           const BreakdownKeys& keys, int caller_period)
    : StepRecorder(parsed, report, options, keys,
                   ReserveRowsAndChooseThread(parsed, report, options), caller_period) {}

StepRecorder::StepRecorder(const ParsedTrace& parsed, Report* report, const ReportOptions& options,
                           const BreakdownKeys& keys, bool concurrent, int caller_period)
    : parsed_(parsed),
      report_(report),
      keys_(keys),
      steps_(options.steps),
      breakdown_(options.breakdown),
      thread_rows_{StepMaker(parsed, report), {}, &report->steps, &report->breakdown},
      caller_rows_{StepMaker(parsed, report), {}, nullptr, nullptr},
      caller_period_(concurrent && parsed.source_is_printed_trace ? caller_period : 0) {
  if (caller_period_ > 0) {
    // Two StepMakers at once: each copies every op name into the report
    // now, so that neither writes to the report's strings later (a printed
    // trace's steps view its source: nothing else is copied).
    thread_rows_.maker.Warm();
    caller_rows_.maker.Warm();
  }
  if (!concurrent) return;
  filling_ = std::make_unique<Block>();
  filling_->rows.reserve(kBlockRows);
  try {
    builder_ = std::thread([this] { BuildBlocks(); });
  } catch (const std::system_error&) {
    filling_.reset();  // no thread: rows are built as they come
  }
}

StepRecorder::~StepRecorder() {
  if (!builder_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    stop_ = true;
  }
  changed_.notify_all();
  builder_.join();
}

void StepRecorder::Build(RowBuilder& rows, std::size_t index, const Row& row,
                         const NamedBytes* named, std::size_t named_count) {
  const Statement& s = parsed_.trace.statements[index];
  if (breakdown_ && row.style != 0) {
    keys_.Set(parsed_.trace, s, row.style, row.delta, std::span<const NamedBytes>(named, named_count),
              &rows.key, rows.breakdown);
  }
  if (steps_) {
    Step step = rows.maker.Make(index, row.delta, row.live);
    step.peak_bytes = row.peak;
    rows.steps->push_back(step);
  }
}

void StepRecorder::BuildBlock(RowBuilder& rows, Block& block) {
  // The statements were read long ago (out of cache): fetch each row's a
  // few rows ahead (a row reads the first 32 bytes of its statement).
  constexpr std::size_t kAhead = 16;
  const auto& statements = parsed_.trace.statements;
  const std::size_t end = block.first + block.rows.size();
  for (std::size_t i = block.first; i < std::min(end, block.first + kAhead); ++i) {
    __builtin_prefetch(&statements[i]);
  }
  // So were the names in the keys (views of the source text): fetch the
  // values kNamesAhead * 2 entries ahead, then their names' bytes.
  constexpr std::size_t kNamesAhead = 8;
  const auto& values = parsed_.trace.values;
  const auto& named = block.named;
  std::size_t value_fetched = 0, name_fetched = 0;
  std::uint32_t named_begin = 0;
  for (std::size_t r = 0; r < block.rows.size(); ++r) {
    if (block.first + r + kAhead < end) __builtin_prefetch(&statements[block.first + r + kAhead]);
    const Row& row = block.rows[r];
    for (; value_fetched < std::min(named.size(), row.named_end + 2 * kNamesAhead); ++value_fetched) {
      __builtin_prefetch(&values[named[value_fetched].first]);
    }
    for (; name_fetched < std::min(named.size(), row.named_end + kNamesAhead); ++name_fetched) {
      __builtin_prefetch(values[named[name_fetched].first].name.data());
    }
    Build(rows, block.first + r, row, block.named.data() + named_begin, row.named_end - named_begin);
    named_begin = row.named_end;
  }
}

void StepRecorder::Record(std::size_t index, std::int64_t delta, std::int64_t live,
                          std::int64_t peak,
                          const std::vector<NamedBytes>& named, std::uint8_t style) {
  if (!filling_) {
    Build(thread_rows_, index, Row{delta, live, peak, 0, style}, named.data(), named.size());
    return;
  }
  Block& b = *filling_;
  if (b.rows.empty()) b.first = index;
  b.named.insert(b.named.end(), named.begin(), named.end());
  b.rows.push_back(Row{delta, live, peak, static_cast<std::uint32_t>(b.named.size()), style});
  if (b.rows.size() == kBlockRows) {
    if (caller_period_ > 0 && ++blocks_filled_ % static_cast<std::size_t>(caller_period_) == 0) {
      caller_rows_.steps = &b.steps;
      caller_rows_.breakdown = &b.keys;
      BuildBlock(caller_rows_, b);
      b.built = true;
    }
    std::unique_ptr<Block> next;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!spare_.empty()) {
        next = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    if (!next) {
      next = std::make_unique<Block>();
      next->rows.reserve(kBlockRows);
    }
    Hand(std::move(filling_));
    filling_ = std::move(next);
  }
}

void StepRecorder::Hand(std::unique_ptr<Block> block) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Bounded: the simulation waits rather than queue the whole trace.
  changed_.wait(lock, [this] { return queue_.size() < kMaxQueuedBlocks || failure_; });
  queue_.push_back(std::move(block));
  lock.unlock();
  changed_.notify_all();
}

void StepRecorder::BuildBlocks() {
  for (;;) {
    std::unique_ptr<Block> block;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return !queue_.empty() || done_; });
      if (stop_) return;
      if (queue_.empty() && done_) {
        lock.unlock();
        try {
          report_->breakdown.items();  // merges it here, off the caller's path
        } catch (...) {
          std::lock_guard<std::mutex> failed(mutex_);
          failure_ = std::current_exception();
        }
        return;
      }
      block = std::move(queue_.front());
      queue_.pop_front();
    }
    changed_.notify_all();
    try {
      if (block->built) {
        // Built by the caller: its rows go after the ones before it.
        report_->steps.insert(report_->steps.end(), block->steps.begin(), block->steps.end());
        report_->breakdown.Append(&block->keys);
        block->steps.clear();
        block->built = false;
      } else {
        BuildBlock(thread_rows_, *block);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = std::current_exception();
      stop_ = true;
      changed_.notify_all();
      return;
    }
    block->rows.clear();
    block->named.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    spare_.push_back(std::move(block));
  }
}

void StepRecorder::EndRows() {
  if (!builder_.joinable() || ended_) return;
  ended_ = true;
  if (filling_ && !filling_->rows.empty()) Hand(std::move(filling_));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  changed_.notify_all();
}

void StepRecorder::Finish() {
  if (!builder_.joinable()) return;
  EndRows();
  builder_.join();
  if (failure_) std::rethrow_exception(failure_);
}

}  // namespace peakmem
