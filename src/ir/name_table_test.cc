// NameTable (peakmem/name_table.h): the trace builder's name table must
// find, add and overwrite exactly as a general hash map does (the
// reference each test keeps alongside), through growth and collisions.
#include "peakmem/ir/name_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace peakmem {
namespace {

// Every name hashes alike: every probe walks the whole run of entries and
// every compare is a full one (the tag never tells names apart).
struct SameHash {
  std::uint64_t operator()(std::string_view) const { return 0x1234567890ABCDEFull; }
};
// Only the length tells names apart: runs of equal tags, and equal low
// bits for names of one length.
struct LengthHash {
  std::uint64_t operator()(std::string_view s) const { return s.size() * 0x9E3779B97F4A7C15ull; }
};

template <typename Hash>
void ExpectLikeAMap(int names, int operations, std::uint32_t seed) {
  // Short names (held in the key), long ones (viewed; kept alive here), and
  // names one byte apart past the 15 held inline.
  std::vector<std::string> pool;
  for (int i = 0; i < names; ++i) {
    pool.push_back("t" + std::to_string(i));
    pool.push_back("t_transformer_h_" + std::to_string(i) + "_attn_weight");
    pool.push_back("abcdefghijklmno" + std::to_string(i % 10));
  }
  NameTable<int, Hash> table;
  std::map<std::string, int> expected;
  std::vector<std::string> order;  // names in the order first inserted
  std::mt19937 rng(seed);
  for (int op = 0; op < operations; ++op) {
    const std::string& name = pool[rng() % pool.size()];
    const int value = static_cast<int>(rng() % 1000);
    switch (rng() % 3) {
      case 0: {
        auto [slot, inserted] = table.Insert(name, value);
        auto [it, expected_inserted] = expected.try_emplace(name, value);
        EXPECT_EQ(inserted, expected_inserted) << name;
        EXPECT_EQ(*slot, it->second) << name;
        if (expected_inserted) order.push_back(name);
        break;
      }
      case 1: {
        table.InsertOrAssign(name, value);
        if (expected.find(name) == expected.end()) order.push_back(name);
        expected[name] = value;
        break;
      }
      default: {
        const int* found = table.Find(name);
        auto it = expected.find(name);
        ASSERT_EQ(found != nullptr, it != expected.end()) << name;
        if (found != nullptr) EXPECT_EQ(*found, it->second) << name;
        break;
      }
    }
  }
  ASSERT_EQ(table.size(), expected.size());
  ASSERT_EQ(table.entries().size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(table.entries()[i].key.view(), order[i]);
    EXPECT_EQ(table.entries()[i].value, expected[order[i]]);
  }
  for (const std::string& name : pool) {
    const int* found = table.Find(name);
    auto it = expected.find(name);
    ASSERT_EQ(found != nullptr, it != expected.end()) << name;
    if (found != nullptr) EXPECT_EQ(*found, it->second);
  }
}

TEST(NameTable, AgreesWithAMapThroughGrowth) {
  // Thousands of names from an empty table: the index doubles many times.
  ExpectLikeAMap<StringHash>(3000, 30000, 1);
}

TEST(NameTable, AgreesWithAMapWhenEveryHashCollides) {
  ExpectLikeAMap<SameHash>(60, 2000, 2);
  ExpectLikeAMap<LengthHash>(200, 5000, 3);
}

TEST(NameTable, ReservedRoomAndEmptyTable) {
  NameTable<int> table;
  EXPECT_EQ(table.Find("t0"), nullptr);  // never sized: nothing to probe
  table.Reserve(100);
  EXPECT_EQ(table.Find("t0"), nullptr);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(table.Insert("t" + std::to_string(i), i).second);
  for (int i = 0; i < 100; ++i) {
    const int* found = table.Find("t" + std::to_string(i));
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(*found, i);
  }
  EXPECT_EQ(table.Find("t100"), nullptr);
  EXPECT_EQ(table.Find(""), nullptr);
  EXPECT_TRUE(table.Insert("", 7).second);  // the empty name is a name like any other
  EXPECT_EQ(*table.Find(""), 7);
}

TEST(NameTable, ShortNamesAreHeldAfterTheTextIsGone) {
  NameTable<int> table;
  {
    std::string scratch = "t816_L55";
    table.Insert(scratch, 1);
    scratch.assign("xxxxxxxx");
  }
  ASSERT_NE(table.Find("t816_L55"), nullptr);
  EXPECT_EQ(*table.Find("t816_L55"), 1);
  EXPECT_EQ(table.Find("xxxxxxxx"), nullptr);
}

}  // namespace
}  // namespace peakmem
