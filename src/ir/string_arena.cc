#include "peakmem/ir/string_arena.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace peakmem {

char* StringArena::NewChunk(std::size_t bytes) {
  // Something longer than a chunk gets a chunk of its own; the current
  // chunk's tail stays usable only if it is larger (keep the larger one).
  const std::size_t size = std::max(kChunkBytes, bytes);
  chunks_.push_back(std::make_unique_for_overwrite<char[]>(size));
  reserved_ += size;
  char* start = chunks_.back().get();
  if (size - bytes > left_) {
    next_ = start + bytes;
    left_ = size - bytes;
  }
  return start;
}

std::string_view StringArena::Save(std::string_view text) {
  if (text.empty()) return {};
  char* dst;
  if (text.size() > left_) {
    dst = NewChunk(text.size());
  } else {
    dst = next_;
    next_ += text.size();
    left_ -= text.size();
  }
  std::memcpy(dst, text.data(), text.size());
  return {dst, text.size()};
}

void* StringArena::Allocate(std::size_t bytes, std::size_t align) {
  // Chunks come from operator new[], aligned for any fundamental type.
  const std::size_t pad = (align - reinterpret_cast<std::uintptr_t>(next_) % align) % align;
  if (left_ < pad || left_ - pad < bytes) return NewChunk(bytes);
  char* start = next_ + pad;
  next_ = start + bytes;
  left_ -= pad + bytes;
  return start;
}

}  // namespace peakmem
