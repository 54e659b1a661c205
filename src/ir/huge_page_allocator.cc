#include "peakmem/ir/huge_page_allocator.h"

#include <sys/mman.h>

namespace peakmem::huge_pages {
namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
std::size_t Rounded(std::size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }
}  // namespace

void* Map(std::size_t bytes) {
  const std::size_t size = Rounded(bytes);
  if (size < bytes) throw std::bad_alloc();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  (void)madvise(p, size, MADV_HUGEPAGE);  // advice only: small pages if refused
#endif
  return p;
}

void Unmap(void* p, std::size_t bytes) { munmap(p, Rounded(bytes)); }

}  // namespace peakmem::huge_pages
