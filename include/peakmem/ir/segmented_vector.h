// A sequence kept in one or more contiguous segments, indexed as one.
//
// What it is for: a trace's statements. A big printed trace is read in
// chunks, one per core (src/frontend/text_chunks.cc), each into its own array;
// joining them used to move every statement of the later chunks into the
// first chunk's array: at 10^6 statements 80 MB written on one thread while
// the other waited (~40 ms), and both copies held until the old one was
// freed. Appending the later arrays as segments costs nothing.
//
// Only the last segment grows. Indexing finds the segment by a scan from
// the last one (a trace has one segment per chunk read, one per core at
// most), so with one or two segments it is a compare or two more than a
// vector's. References stay valid while the sequence grows except into the
// last segment (as with a vector, growing may move that one).
#pragma once

#include <cstddef>
#include <iterator>
#include <span>
#include <utility>
#include <vector>

namespace peakmem {

template <typename T>
class SegmentedVector {
 public:
  using value_type = T;
  using size_type = std::size_t;

  SegmentedVector() : segments_(1), starts_(1, 0) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](std::size_t i) { return const_cast<T&>(std::as_const(*this)[i]); }
  const T& operator[](std::size_t i) const {
    std::size_t k = segments_.size() - 1;
    while (i < starts_[k]) --k;
    return segments_[k][i - starts_[k]];
  }
  T& back() { return segments_.back().back(); }
  const T& back() const { return segments_.back().back(); }

  // Room for `n` elements in all, in the last segment.
  void reserve(std::size_t n) {
    if (n > size_) segments_.back().reserve(segments_.back().size() + (n - size_));
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    T& added = segments_.back().emplace_back(std::forward<Args>(args)...);
    ++size_;
    return added;
  }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  void push_back(const T& value) { emplace_back(value); }

  // Appends every element of `other` (its segments move over whole: no
  // element is moved or copied); `other` is left empty.
  void Append(SegmentedVector&& other) {
    for (std::vector<T>& segment : other.segments_) {
      if (segment.empty()) continue;
      if (segments_.back().empty()) {
        segments_.back() = std::move(segment);
        starts_.back() = size_;
      } else {
        starts_.push_back(size_);
        segments_.push_back(std::move(segment));
      }
      size_ += segments_.back().size();
    }
    other = SegmentedVector();
  }

  std::size_t segment_count() const { return segments_.size(); }
  std::span<const T> segment(std::size_t k) const { return segments_[k]; }

  template <bool kConst>
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = std::conditional_t<kConst, const T*, T*>;
    using reference = std::conditional_t<kConst, const T&, T&>;
    using Segments = std::conditional_t<kConst, const std::vector<std::vector<T>>,
                                        std::vector<std::vector<T>>>;

    Iterator() = default;
    Iterator(Segments* segments, std::size_t k, std::size_t at)
        : segments_(segments), k_(k), at_(at) {
      SkipEmpty();
    }
    reference operator*() const { return (*segments_)[k_][at_]; }
    pointer operator->() const { return &(*segments_)[k_][at_]; }
    Iterator& operator++() {
      ++at_;
      SkipEmpty();
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const Iterator& other) const { return k_ == other.k_ && at_ == other.at_; }

   private:
    void SkipEmpty() {
      while (k_ < segments_->size() && at_ == (*segments_)[k_].size()) {
        ++k_;
        at_ = 0;
      }
    }
    Segments* segments_ = nullptr;
    std::size_t k_ = 0;
    std::size_t at_ = 0;
  };
  using iterator = Iterator<false>;
  using const_iterator = Iterator<true>;

  iterator begin() { return iterator(&segments_, 0, 0); }
  iterator end() { return iterator(&segments_, segments_.size(), 0); }
  const_iterator begin() const { return const_iterator(&segments_, 0, 0); }
  const_iterator end() const { return const_iterator(&segments_, segments_.size(), 0); }

 private:
  std::vector<std::vector<T>> segments_;  // never empty; only the last may be empty
  std::vector<std::size_t> starts_;       // starts_[k]: the index of segments_[k][0]
  std::size_t size_ = 0;
};

}  // namespace peakmem
