// The trace's arena (StringArena::Allocate) and the lists the IR keeps in it
// (ArenaSpan, ExprList, Trace::SaveExprs / SaveArray): what is saved reads
// back the same, aligned, and stays where it is while more is saved.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/ir/string_arena.h"
#include "peakmem/ir/trace.h"

namespace peakmem {
namespace {

// Every allocation is aligned as asked, inside no other, and keeps what was
// written to it while the arena grows past many chunks (64 KB each) and takes
// blocks larger than a chunk.
TEST(Arena, AllocationsAreAlignedDisjointAndStable) {
  StringArena arena;
  struct Block {
    unsigned char* p;
    std::size_t size;
    unsigned char fill;
  };
  std::vector<Block> blocks;
  std::size_t total = 0;
  for (int i = 0; i < 4000; ++i) {
    const std::size_t align = std::size_t{1} << (i % 5);  // 1..16
    const std::size_t size = i % 97 == 0 ? 100000 : 1 + (i * 37) % 300;
    auto* p = static_cast<unsigned char*>(arena.Allocate(size, align));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << i;
    const auto fill = static_cast<unsigned char>(i);
    std::fill(p, p + size, fill);
    blocks.push_back({p, size, fill});
    total += size;
    if (i % 3 == 0) arena.Save("interleaved text");  // strings share the chunks
  }
  EXPECT_GE(arena.bytes_reserved(), total);
  for (const Block& b : blocks) {
    for (std::size_t k = 0; k < b.size; ++k) ASSERT_EQ(b.p[k], b.fill);
  }
}

// A call's items and keyword names read back from the arena: the keywords are
// the names of the last items, in order; a list without keywords has none.
TEST(Arena, SavedExpressionListsKeepItemsAndKeywords) {
  Trace trace;
  std::vector<Expr> items(5);
  for (int i = 0; i < 5; ++i) {
    items[i].kind = Expr::Kind::kValue;
    items[i].value = static_cast<ValueId>(10 + i);
  }
  const std::vector<std::string_view> names = {"dim", "keepdim"};
  const ExprList call = trace.SaveExprs(items, names);
  const ExprList tuple = trace.SaveExprs(std::span<const Expr>(items).first(3));
  ASSERT_EQ(call.size(), 5u);
  ASSERT_EQ(call.keyword_count(), 2u);
  EXPECT_EQ(std::vector<std::string_view>(call.keywords().begin(), call.keywords().end()), names);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(call[i].value, static_cast<ValueId>(10 + i));
  EXPECT_EQ(tuple.size(), 3u);
  EXPECT_TRUE(tuple.keywords().empty());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(call.data()) % alignof(Expr), 0u);
  // Nothing for an empty list.
  EXPECT_TRUE(trace.SaveExprs({}).empty());
  EXPECT_TRUE(trace.SaveArray(std::vector<ValueId>{}).empty());
  // first(n) views the same items.
  EXPECT_EQ(call.first(2).data(), call.data());
  EXPECT_EQ(call.first(2).size(), 2u);
}

// Lists saved in a chunk's trace stay valid after the trace that adopts its
// arena (Trace::AdoptStorage) outlives it: what a chunked read relies on.
TEST(Arena, AdoptedArenaOutlivesTheChunkTrace) {
  Trace whole;
  ArenaSpan<ValueId> ids;
  {
    Trace chunk;
    std::vector<ValueId> values;
    for (ValueId v = 0; v < 20000; ++v) values.push_back(v * 3);
    ids = chunk.SaveArray(values);
    whole.AdoptStorage(std::move(chunk));
  }
  ASSERT_EQ(ids.size(), 20000u);
  for (ValueId v = 0; v < 20000; ++v) ASSERT_EQ(ids[v], v * 3);
}

}  // namespace
}  // namespace peakmem
