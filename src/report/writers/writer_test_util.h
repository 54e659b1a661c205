// A hand-built report and allocation event log for the writers' tests, and a
// reader of the pickle subset the snapshot writer emits.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "peakmem/report/report.h"

namespace peakmem::writers::testing {

// Three statements after two arguments, by hand (no model ran):
//   arguments: a 16 bytes (argument), b 1000 bytes (saved)      live 1016
//   step 0, line 5 "t0 = torch.mul(a, a)": t0 1024 (intermediate) and a
//     4-byte scratch allocated and freed            live 2040, peak in step 2044
//   step 1, line 6 "del t0": frees t0                             live 1016
//   step 2, line 7 "t1 = torch.neg(b)": t1 600 (intermediate)     live 1616
// peak 2044 at step 0 (with the scratch), final 1616.
inline Report HandBuiltReport(bool with_log) {
  Report r;
  r.model = "runtime";
  r.trace_name = "hand.trace";
  r.peak_bytes = 2044;
  r.final_bytes = 1616;
  r.peak_step = 0;
  r.steps = {
      Step{0, 5, "mul", "t0 = torch.mul(a, a)", 1024, 2040, 2044},
      Step{1, 6, "python_del", "del t0", -1024, 1016, 1016},
      Step{2, 7, "neg", "t1 = torch.neg(b)", 600, 1616, 1616},
  };
  if (!with_log) return r;
  auto log = std::make_shared<AllocLog>();
  log->devices = {"cpu"};
  log->steps = 3;
  auto storage = [&](std::int64_t bytes, StorageRole role, std::int32_t made, std::int32_t freed) {
    StorageRecord s;
    s.bytes = bytes;
    s.role = role;
    s.made_at = made;
    s.freed_at = freed;
    log->storages.push_back(s);
    return static_cast<StorageId>(log->storages.size() - 1);
  };
  const StorageId a = storage(16, StorageRole::kArgument, kBeforeFirstStep, kNeverFreed);
  const StorageId b = storage(1000, StorageRole::kSaved, kBeforeFirstStep, kNeverFreed);
  const StorageId t0 = storage(1024, StorageRole::kIntermediate, 0, 1);
  const StorageId scratch = storage(4, StorageRole::kScratch, 0, 0);
  const StorageId t1 = storage(600, StorageRole::kIntermediate, 2, kNeverFreed);
  log->storages[t0].free_seq = 2;
  log->storages[scratch].free_seq = 1;
  log->events = {
      {kBeforeFirstStep, a, 16, true}, {kBeforeFirstStep, b, 1000, true}, {0, t0, 1024, true},
      {0, scratch, 4, true},           {0, scratch, -4, false},           {1, t0, -1024, false},
      {2, t1, 600, true},
  };
  log->name_text = std::make_shared<StringArena>();
  log->storage_names = {"a", "b", "t0", "", "t1"};
  r.alloc_log = std::move(log);
  return r;
}

// Reads the pickle opcodes PickleEmitter writes into JSON values (dict ->
// object, list -> array); throws std::runtime_error on anything else.
inline nlohmann::json ReadPickle(const std::string& bytes) {
  std::vector<nlohmann::json> stack;
  std::vector<std::size_t> marks;
  std::vector<nlohmann::json> memo;
  std::size_t i = 0;
  auto need = [&](std::size_t n) {
    if (i + n > bytes.size()) throw std::runtime_error("pickle cut short");
  };
  auto le = [&](std::size_t n) {
    need(n);
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < n; ++k) v |= std::uint64_t{static_cast<unsigned char>(bytes[i + k])} << (8 * k);
    i += n;
    return v;
  };
  auto pop_mark = [&] {
    if (marks.empty()) throw std::runtime_error("no mark");
    const std::size_t m = marks.back();
    marks.pop_back();
    std::vector<nlohmann::json> items(stack.begin() + static_cast<std::ptrdiff_t>(m), stack.end());
    stack.resize(m);
    return items;
  };
  auto put = [&](std::size_t index) {
    if (memo.size() <= index) memo.resize(index + 1);
    memo[index] = stack.back();
  };
  need(2);
  if (bytes[0] != '\x80' || bytes[1] != 2) throw std::runtime_error("not protocol 2");
  i = 2;
  while (true) {
    need(1);
    const char op = bytes[i++];
    switch (op) {
      case '.': if (stack.size() != 1) throw std::runtime_error("stack at STOP"); return stack[0];
      case '(': marks.push_back(stack.size()); break;
      case '}': stack.push_back(nlohmann::json::object()); break;
      case ']': stack.push_back(nlohmann::json::array()); break;
      case 'u': {
        auto items = pop_mark();
        if (items.size() % 2) throw std::runtime_error("odd SETITEMS");
        for (std::size_t k = 0; k < items.size(); k += 2) stack.back()[items[k].get<std::string>()] = items[k + 1];
        break;
      }
      case 'e': for (auto& item : pop_mark()) stack.back().push_back(item); break;
      case 'X': { const auto n = le(4); need(n); stack.push_back(bytes.substr(i, n)); i += n; break; }
      case 'K': stack.push_back(le(1)); break;
      case 'M': stack.push_back(le(2)); break;
      case 'J': stack.push_back(static_cast<std::int32_t>(le(4))); break;
      case '\x8a': {
        if (le(1) != 8) throw std::runtime_error("LONG1 of other than 8 bytes");
        stack.push_back(static_cast<std::int64_t>(le(8)));
        break;
      }
      case 'N': stack.push_back(nullptr); break;
      case '\x88': stack.push_back(true); break;
      case '\x89': stack.push_back(false); break;
      case 'q': put(le(1)); break;
      case 'r': put(le(4)); break;
      case 'h': stack.push_back(memo.at(le(1))); break;
      case 'j': stack.push_back(memo.at(le(4))); break;
      default: throw std::runtime_error("unexpected opcode " + std::to_string(static_cast<unsigned char>(op)));
    }
  }
}

}  // namespace peakmem::writers::testing
