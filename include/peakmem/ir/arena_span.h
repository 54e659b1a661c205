// A view of an array that lives in a trace's arena (see string_arena.h).
//
// The lists of a big trace (a call's arguments, a tuple's items) were each a
// std::vector: one heap allocation per list (~900,000 at 10^6 statements),
// 24 bytes in the owner and a malloc header per list. The readers now copy a
// finished list into the trace's arena once, and the IR holds this 16-byte
// view of it: no allocation, nothing to free, and the elements (trivially
// copyable) are copied with the view. A view is valid as long as the arena
// of the trace that made it (a trace adopts the arenas of the chunks it
// joins: Trace::AdoptStorage).
//
// The elements are mutable through a non-const view (a reader renumbers the
// values of a chunk in place) and const through a const one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace peakmem {

template <typename T>
class ArenaSpan {
 public:
  ArenaSpan() = default;
  ArenaSpan(T* data, std::size_t size) : data_(data), size_(static_cast<std::uint32_t>(size)) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  operator std::span<const T>() const { return {data_, size_}; }
  // The first `n` elements (n <= size()).
  ArenaSpan first(std::size_t n) const { return ArenaSpan(data_, n); }

 protected:
  T* data_ = nullptr;
  std::uint32_t size_ = 0;
  // Free for a subclass (ExprList: how many trailing items are keywords);
  // it would be padding otherwise.
  std::uint32_t extra_ = 0;
};

}  // namespace peakmem
