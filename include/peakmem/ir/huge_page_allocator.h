// An allocator for big tables read at random: blocks of 4 MiB or more are
// mapped on their own and marked for transparent huge pages
// (madvise(MADV_HUGEPAGE)); smaller ones come from the heap.
//
// Why: a table of one entry per name or value of a 10^6-statement trace is
// tens of MB, and each lookup lands on a random 4 KiB page: a TLB miss every
// time, and a slow one in a virtual machine (a two-level page walk). Backed
// by 2 MiB pages the same table needs a few dozen TLB entries. Measured on
// the text reader's name table (docs/scaling.md): the one-thread read of
// 10^6 statements ~7% faster. Huge pages cost more to fault in on this VM
// (~3x per byte), so the allocator is for tables probed at random, never
// for arrays written once in order. Where the kernel has THP off (or
// madvise fails) the mapping simply stays on small pages.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace peakmem {

namespace huge_pages {
inline constexpr std::size_t kMinBytes = std::size_t{4} << 20;
// A private anonymous mapping of at least `bytes` (rounded up to 2 MiB),
// marked MADV_HUGEPAGE; throws std::bad_alloc when it cannot be mapped.
void* Map(std::size_t bytes);
void Unmap(void* p, std::size_t bytes);
}  // namespace huge_pages

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_pages::kMinBytes) return std::allocator<T>().allocate(n);
    return static_cast<T*>(huge_pages::Map(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < huge_pages::kMinBytes) {
      std::allocator<T>().deallocate(p, n);
    } else {
      huge_pages::Unmap(p, bytes);
    }
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;  // stateless
  }
};

}  // namespace peakmem
