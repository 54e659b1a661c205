// A streaming writer of Python pickles, protocol 2, for the values a
// PyTorch memory snapshot holds: dict, list, str, int, None, bool.
//
// Containers are written as Python's pickler writes them: EMPTY_DICT or
// EMPTY_LIST, MARK, the items, SETITEMS or APPENDS (one batch, of any
// length). Strings are BINUNICODE (invalid UTF-8 replaced by U+FFFD, which
// `pickle.loads` would otherwise reject); a string written with Memo() is
// stored in the unpickler's memo the first time and fetched from it after
// (dict keys and names that repeat on every entry). The bytes go to the sink
// about a megabyte at a time.
//
//   PickleEmitter p(sink);                 // PROTO 2
//   p.BeginDict(); p.Memo("size"); p.Int(512); p.EndDict();
//   p.Finish();                            // STOP; `pickle.loads` gives {'size': 512}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <absl/container/flat_hash_map.h>

#include "peakmem/report/report.h"

namespace peakmem::writers {

class PickleEmitter {
 public:
  explicit PickleEmitter(const ReportSink& sink);
  void BeginDict();  // then key, value, key, value, ...
  void EndDict();
  void BeginList();
  void EndList();
  void Str(std::string_view text);
  void Memo(std::string_view text);  // a string, memoised
  void Int(std::int64_t value);
  void None();
  void Bool(bool value);
  // Ends the pickle and hands what is left to the sink.
  void Finish();

 private:
  void Op(char op) { out_ += op; }
  void Le32(std::uint32_t value);
  void FlushIfFull();

  const ReportSink& sink_;
  std::string out_;
  absl::flat_hash_map<std::string, std::uint32_t> memo_;
};

// `text` with every invalid UTF-8 sequence replaced by U+FFFD (the bytes
// Python's decoder would accept unchanged, and nothing else).
std::string ValidUtf8(std::string_view text);

}  // namespace peakmem::writers
