// PyTorch's layout rules (layout.h), each expected stride derived by hand
// in the comment from the rule it tests.
#include "peakmem/semantics/layout.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

TEST(Layout, ContiguousStridesAreRowMajor) {
  // [2, 3, 4]: the last dim moves by 1, the middle by 4, the first by 12.
  EXPECT_EQ(ContiguousStrides({2, 3, 4}), (Dims{12, 4, 1}));
}

TEST(Layout, SizeOneDimensionsDoNotBreakContiguity) {
  // TensorImpl's is_contiguous skips dims of size 1: [2, 1, 3] with the
  // size-1 dim's stride 7 is still contiguous.
  EXPECT_TRUE(IsContiguous({2, 1, 3}, {3, 7, 1}));
  EXPECT_FALSE(IsContiguous({2, 3}, {1, 2}));  // a transpose
}

TEST(Layout, ViewOfATransposeNeedsACopyButSplittingTheOuterDimDoesNot) {
  // x.t() of [3, 2] has shape [2, 3], strides (1, 2): flattening it to [6]
  // cannot be a view (computeStride finds no stride for the merged dim).
  EXPECT_EQ(ComputeViewStrides({2, 3}, {1, 2}, {6}), std::nullopt);
  // A contiguous [6] viewed as [2, 3]: strides (3, 1).
  EXPECT_EQ(ComputeViewStrides({6}, {1}, {2, 3}), (Dims{3, 1}));
}

TEST(Layout, ElementwiseOutputFollowsAPermutedInput) {
  // TensorIterator: one input [2, 3] with strides (1, 2) (a transpose) gives
  // the output the same dimension order: strides (1, 2).
  const Dims shape{2, 3}, strides{1, 2};
  EXPECT_EQ(ElementwiseOutputStrides(shape, {Operand{&shape, &strides, false}}), (Dims{1, 2}));
}

TEST(Layout, StorageSpanOfAnExpandedView) {
  // [2, 3, 4] with strides (0, 0, 1) touches 1 + 3*1 = 4 elements.
  EXPECT_EQ(StorageSpan({2, 3, 4}, {0, 0, 1}), 4u);
  EXPECT_EQ(StorageSpan({0, 3}, {3, 1}), 0u);
}

TEST(Layout, PreserveFormatKeepsADenseInputsOrderElseContiguous) {
  EXPECT_EQ(PreserveFormatStrides({2, 3}, {1, 2}), (Dims{1, 2}));
  // Strides (0, 1) overlap (an expanded view): contiguous (3, 1).
  EXPECT_EQ(PreserveFormatStrides({2, 3}, {0, 1}), (Dims{3, 1}));
}

}  // namespace
}  // namespace peakmem
