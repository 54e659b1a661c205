#include "peakmem/string_arena.h"

#include <algorithm>
#include <cstring>

namespace peakmem {

std::string_view StringArena::Save(std::string_view text) {
  if (text.empty()) return {};
  if (text.size() > left_) {
    // A string longer than a chunk gets a chunk of its own; the current
    // chunk's tail stays usable only if it is larger (keep the larger one).
    const std::size_t size = std::max(kChunkBytes, text.size());
    chunks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    reserved_ += size;
    if (size == kChunkBytes || size - text.size() > left_) {
      next_ = chunks_.back().get();
      left_ = size;
    } else {
      char* dst = chunks_.back().get();
      std::memcpy(dst, text.data(), text.size());
      return {dst, text.size()};
    }
  }
  char* dst = next_;
  std::memcpy(dst, text.data(), text.size());
  next_ += text.size();
  left_ -= text.size();
  return {dst, text.size()};
}

}  // namespace peakmem
