// OrderedBreakdown has Python dict semantics: setting a key again replaces
// its value and keeps its first position. Set only appends and repeats are
// merged when items() is read, so these tests set repeated keys in every
// pattern that merge must get right and compare with what a Python dict
// gives (worked out by hand, or by a plain linear dict in the test).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/report/report.h"

namespace peakmem {
namespace {

using Items = std::vector<std::pair<std::string, std::int64_t>>;

Items ItemsOf(const OrderedBreakdown& b) {
  Items out;
  for (const auto& [k, v] : b.items()) out.emplace_back(std::string(k), v);
  return out;
}

TEST(OrderedBreakdown, RepeatedKeysKeepFirstPlaceAndLastValue) {
  // Python: d = {}; d['a']=1; d['b']=2; d['a']=3; d['c']=4; d['b']=5; d['a']=6
  // list(d.items()) == [('a', 6), ('b', 5), ('c', 4)]
  OrderedBreakdown b;
  b.Set("a", 1);
  b.Set("b", 2);
  b.Set("a", 3);
  b.Set("c", 4);
  b.Set("b", 5);
  b.Set("a", 6);
  EXPECT_EQ(ItemsOf(b), (Items{{"a", 6}, {"b", 5}, {"c", 4}}));
  EXPECT_EQ(b.size(), 3u);
}

TEST(OrderedBreakdown, SetAfterReadMergesWithEarlierKeys) {
  // d = {'x': 1, 'y': 2}; read; d['x'] = 7; d['z'] = 8 -> [x:7, y:2, z:8]
  OrderedBreakdown b;
  b.Set("x", 1);
  b.Set("y", 2);
  EXPECT_EQ(ItemsOf(b), (Items{{"x", 1}, {"y", 2}}));
  b.Set("x", 7);
  b.Set("z", 8);
  EXPECT_EQ(ItemsOf(b), (Items{{"x", 7}, {"y", 2}, {"z", 8}}));
}

TEST(OrderedBreakdown, ManyKeysWithRepeatsMatchALinearDict) {
  // 300000 sets over keys "k0".."k99999", key i % 100000 at step i, with every
  // seventh step re-setting an earlier key: enough entries to use the big
  // bucket sizes. The reference is a plain vector searched linearly per
  // key index (a dict by definition).
  const int n = 300000, keys = 100000;
  OrderedBreakdown b;
  std::vector<int> first(keys, -1);
  std::vector<std::int64_t> last(keys, 0);
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    const int k = i % 7 == 0 ? (i / 7) % keys : (i * 31) % keys;
    b.Set("k" + std::to_string(k), i);
    if (first[k] < 0) {
      first[k] = i;
      order.push_back(k);
    }
    last[k] = i;
  }
  Items want;
  for (int k : order) want.emplace_back("k" + std::to_string(k), last[k]);
  EXPECT_EQ(ItemsOf(b), want);
}

// A part built elsewhere (StepRecorder: the caller's blocks) and appended
// reads as if its keys were set here after the ones before: a key it repeats
// keeps its first place here and takes the part's value. Python: d = {'a': 1,
// 'b': 2}; then d['c'] = 3; d['a'] = 4 (the part); then d['d'] = 5 ->
// [a:4, b:2, c:3, d:5]. The part is left empty and reusable; the keys stay
// valid after the part is gone (their arena moved over).
TEST(OrderedBreakdown, AppendedPartReadsAsIfSetHere) {
  OrderedBreakdown b;
  b.Set("a", 1);
  b.Set("b", 2);
  {
    OrderedBreakdown part;
    part.Set("c", 3);
    part.Set("a", 4);
    b.Append(&part);
    EXPECT_EQ(part.size(), 0u);
    part.Set("e", 9);  // reused: a part of its own again
    EXPECT_EQ(ItemsOf(part), (Items{{"e", 9}}));
  }
  b.Set("d", 5);
  EXPECT_EQ(ItemsOf(b), (Items{{"a", 4}, {"b", 2}, {"c", 3}, {"d", 5}}));
}

// Appending in pieces gives what setting every key in one breakdown gives,
// with repeats across pieces (the merge sees them all).
TEST(OrderedBreakdown, PiecewiseAppendMatchesOneBreakdown) {
  OrderedBreakdown whole, pieces, part;
  for (int i = 0; i < 50000; ++i) {
    const std::string key = "k" + std::to_string((i * 7919) % 20000);
    whole.Set(key, i);
    if ((i / 1000) % 2 == 0) {
      pieces.Set(key, i);
    } else {
      part.Set(key, i);
      if (i % 1000 == 999) pieces.Append(&part);
    }
  }
  pieces.Append(&part);
  EXPECT_EQ(ItemsOf(pieces), ItemsOf(whole));
}

}  // namespace
}  // namespace peakmem
