// Stable storage for the strings of a trace or a report.
//
// The IR and reports refer to text by std::string_view: names, callees,
// constants and subsymbol lines of a printed trace point straight into its
// source (kept alive by the Trace); strings that come from elsewhere (JSON,
// a live Python trace, text peakmem renders) are copied here once. Strings
// are appended to large chunks, never moved or freed one by one, so a view
// stays valid as long as the arena lives, and saving costs one memcpy
// instead of a heap allocation per string (a 10^6-statement trace has
// millions of them). A trace's expression lists live here too (Allocate;
// see arena_span.h).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

namespace peakmem {

class StringArena {
 public:
  StringArena() = default;
  StringArena(StringArena&&) noexcept = default;
  StringArena& operator=(StringArena&&) noexcept = default;
  StringArena(const StringArena&) = delete;
  StringArena& operator=(const StringArena&) = delete;

  // Copies `text` into the arena; the view stays valid while the arena lives.
  std::string_view Save(std::string_view text);
  // Room for `bytes` bytes aligned to `align` (a power of two no larger
  // than alignof(std::max_align_t)), valid while the arena lives. Never
  // freed one by one: for trivially destructible objects only.
  void* Allocate(std::size_t bytes, std::size_t align);
  // Bytes held (for memory accounting in benchmarks).
  std::size_t bytes_reserved() const { return reserved_; }

 private:
  static constexpr std::size_t kChunkBytes = 64 * 1024;
  // A new chunk of at least `bytes`; returns its start. The current chunk
  // stays the one allocations come from unless the new one has more room
  // left after `bytes`.
  char* NewChunk(std::size_t bytes);
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* next_ = nullptr;
  std::size_t left_ = 0;
  std::size_t reserved_ = 0;
};

}  // namespace peakmem
