// SegmentedVector (peakmem/segmented_vector.h): a sequence in segments must
// index, iterate and grow exactly as one std::vector holding the same
// elements in the same order (the reference each test builds alongside).
#include "peakmem/ir/segmented_vector.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peakmem {
namespace {

SegmentedVector<std::string> Of(const std::vector<std::string>& items) {
  SegmentedVector<std::string> v;
  for (const std::string& s : items) v.push_back(s);
  return v;
}

void ExpectSame(const SegmentedVector<std::string>& v, const std::vector<std::string>& expected) {
  ASSERT_EQ(v.size(), expected.size());
  EXPECT_EQ(v.empty(), expected.empty());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(v[i], expected[i]) << i;
  std::vector<std::string> iterated;
  for (const std::string& s : v) iterated.push_back(s);
  EXPECT_EQ(iterated, expected);
  if (!expected.empty()) EXPECT_EQ(v.back(), expected.back());
}

TEST(SegmentedVector, AppendedSegmentsIndexAndIterateAsOneSequence) {
  SegmentedVector<std::string> v = Of({"a", "b", "c"});
  v.Append(Of({"d"}));
  v.Append(Of({"e", "f"}));
  EXPECT_EQ(v.segment_count(), 3u);
  ExpectSame(v, {"a", "b", "c", "d", "e", "f"});
  // Growing goes on in the last segment.
  v.emplace_back("g");
  v.push_back("h");
  EXPECT_EQ(v.segment_count(), 3u);
  EXPECT_EQ(v.segment(2).size(), 4u);
  ExpectSame(v, {"a", "b", "c", "d", "e", "f", "g", "h"});
}

TEST(SegmentedVector, EmptyPartsAddNoSegments) {
  SegmentedVector<std::string> v;
  v.Append(SegmentedVector<std::string>());
  EXPECT_EQ(v.segment_count(), 1u);
  ExpectSame(v, {});
  EXPECT_EQ(v.begin(), v.end());
  // Appended to an empty sequence: the segment replaces the empty one.
  v.Append(Of({"x", "y"}));
  EXPECT_EQ(v.segment_count(), 1u);
  ExpectSame(v, {"x", "y"});
  v.Append(SegmentedVector<std::string>());
  EXPECT_EQ(v.segment_count(), 1u);
  // A sequence that is itself in segments brings all of them.
  SegmentedVector<std::string> two = Of({"p"});
  two.Append(Of({"q", "r"}));
  v.Append(std::move(two));
  EXPECT_EQ(v.segment_count(), 3u);
  ExpectSame(v, {"x", "y", "p", "q", "r"});
  EXPECT_TRUE(two.empty());  // NOLINT(bugprone-use-after-move): Append leaves it empty
  EXPECT_EQ(two.size(), 0u);
}

TEST(SegmentedVector, AppendMovesNoElement) {
  SegmentedVector<std::string> v = Of({"a"});
  SegmentedVector<std::string> tail = Of({"b", "c"});
  const std::string* b = &tail[0];
  v.Append(std::move(tail));
  EXPECT_EQ(&v[1], b);  // the same element, where it was
  const std::string* a = &v[0];
  for (int i = 0; i < 1000; ++i) v.push_back(std::to_string(i));
  EXPECT_EQ(&v[0], a);  // earlier segments never move
  EXPECT_EQ(v[1001], "998");
}

TEST(SegmentedVector, ManySegmentsAgreeWithAVector) {
  SegmentedVector<std::string> v;
  std::vector<std::string> expected;
  for (int part = 0; part < 40; ++part) {
    SegmentedVector<std::string> piece;
    piece.reserve(static_cast<std::size_t>(part % 7));
    for (int i = 0; i < part % 7; ++i) {
      piece.push_back(std::to_string(part) + "." + std::to_string(i));
      expected.push_back(piece.back());
    }
    v.Append(std::move(piece));
  }
  ExpectSame(v, expected);
  // Writable through indexing and iteration.
  v[5] += "!";
  expected[5] += "!";
  for (std::string& s : v) s += "+";
  for (std::string& s : expected) s += "+";
  ExpectSame(v, expected);
}

}  // namespace
}  // namespace peakmem
