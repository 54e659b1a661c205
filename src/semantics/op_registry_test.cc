// The op registry: what each kind of op declares. Adding an op is one
// entry in op_registry.cc plus a line here saying what it does.
#include "peakmem/semantics/op_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace peakmem {
namespace {

TEST(OpRegistry, ViewsAndMaybeViewsDeclareTheirLayoutRules) {
  EXPECT_EQ(FindOp("transpose")->effect, OpEffect::kViewOfInput);
  EXPECT_EQ(FindOp("transpose")->layout, LayoutRule::kTranspose);
  EXPECT_EQ(FindOp("expand")->layout, LayoutRule::kExpand);
  EXPECT_EQ(FindOp("broadcast_in_dim")->layout, LayoutRule::kBroadcastInDim);
  EXPECT_EQ(FindOp("reshape")->effect, OpEffect::kMaybeView);
  EXPECT_EQ(FindOp("reshape")->layout, LayoutRule::kReshape);
  EXPECT_EQ(FindOp("contiguous")->effect, OpEffect::kMaybeView);
  EXPECT_EQ(FindOp("contiguous")->layout, LayoutRule::kContiguous);
  EXPECT_EQ(FindOp("to")->layout, LayoutRule::kPreserve);
}

TEST(OpRegistry, OpsThatReturnAnInputSayWhichAndTypeTheirOutputsFromIt) {
  // copy_(copy_from, copy_to) returns copy_to, argument 1.
  EXPECT_EQ(FindOp("copy_")->effect, OpEffect::kReturnsInput);
  EXPECT_EQ(FindOp("copy_")->returned_arg, 1);
  EXPECT_EQ(FindOp("copy_")->output_types, OutputTypes::kReturnedInputs);
  // update_aliases((a, b)) -> (a, b): output i is argument i.
  EXPECT_EQ(FindOp("update_aliases")->returned_arg, -1);
  EXPECT_EQ(FindOp("add_")->effect, OpEffect::kInPlace);
  EXPECT_EQ(FindOp("add")->output_types, OutputTypes::kPrinted);
}

TEST(OpRegistry, DTensorWrappersAreViewsOfTheLocalShard) {
  // t20 = get_dtensor_inner_tensor(l_x_): the local shard's tensor;
  // t23 = construct_dtensor(t10, DTensorSpec(...)): a DTensor around t10.
  for (const char* op : {"get_dtensor_inner_tensor", "construct_dtensor"}) {
    ASSERT_NE(FindOp(op), nullptr) << op;
    EXPECT_EQ(FindOp(op)->effect, OpEffect::kViewOfInput) << op;
    EXPECT_EQ(FindOp(op)->layout, LayoutRule::kSameStrides) << op;
  }
}

TEST(OpRegistry, ScratchRules) {
  EXPECT_EQ(FindOp("mul")->scratch, ScratchRule::kWrappedScalars);
  EXPECT_EQ(FindOp("where")->scratch, ScratchRule::kWhereScalar);
  EXPECT_EQ(FindOp("mm")->scratch, ScratchRule::kBlasOperandClones);
  EXPECT_EQ(FindOp("matmul")->scratch, ScratchRule::kBlasOperandClones);
  // linear is x @ w.t(): an expanded x is copied (the differential run).
  EXPECT_EQ(FindOp("linear")->scratch, ScratchRule::kBlasOperandClones);
  // Thunder's fallback gradients, by name pattern.
  const OpInfo* vjp = FindOp("half_vjp");
  ASSERT_NE(vjp, nullptr);
  EXPECT_EQ(vjp->scratch, ScratchRule::kRecomputedForward);
  EXPECT_EQ(vjp->output_types, OutputTypes::kForwardInputs);
}

// The rules the models read an op's arguments by, declared per entry point.
TEST(OpRegistry, CallFormsAndRuleFlags) {
  const std::pair<const char*, CallForm> kForms[] = {
      {"mm", CallForm::kMm},           {"matmul", CallForm::kMatmul},
      {"linear", CallForm::kLinear},   {"conv2d", CallForm::kConv2d},
      {"convolution", CallForm::kConvolution}, {"sort", CallForm::kSort},
      {"topk", CallForm::kTopK},       {"max_pool1d_with_indices", CallForm::kMaxPool1d},
      {"max_pool2d_with_indices", CallForm::kMaxPool2d},
      {"max_pool3d_with_indices", CallForm::kMaxPool3d}, {"add", CallForm::kDefault}};
  for (const auto& [name, form] : kForms) {
    ASSERT_NE(FindOp(name), nullptr) << name;
    EXPECT_EQ(FindOp(name)->form, form) << name;
  }
  EXPECT_TRUE(FindOp("sum")->half_full_reduction_copy);
  EXPECT_FALSE(FindOp("prod")->half_full_reduction_copy);
  EXPECT_TRUE(FindOp("dtensor_mul_prim")->redistributes_operands);
  EXPECT_TRUE(FindOp("dtensor_to_local")->redistributes_operands);
  EXPECT_FALSE(FindOp("get_dtensor_inner_tensor")->redistributes_operands);
  EXPECT_FALSE(FindOp("mul")->redistributes_operands);
  EXPECT_EQ(FindOp("torch_all_reduce_prim_impl")->nccl_collective, "all_reduce");
  EXPECT_EQ(FindOp("torch_reduce_scatter_prim_impl")->nccl_collective, "reduce_scatter");
  EXPECT_EQ(FindOp("torch_wait_prim_impl")->nccl_collective, "");
}

TEST(OpRegistry, CalleeKeyedEntriesTellSameNamedOpsApart) {
  // Tensor.unfold(dim, size, step) is a view; F.unfold (im2col) a fresh tensor.
  EXPECT_EQ(FindCallOp("torch.Tensor.unfold", "unfold")->effect, OpEffect::kViewOfInput);
  EXPECT_EQ(FindCallOp("Tensor.unfold", "unfold")->effect, OpEffect::kViewOfInput);
  EXPECT_EQ(FindCallOp("torch.nn.functional.unfold", "unfold")->effect, OpEffect::kAllocates);
  // Without a dotted callee entry, the symbol name decides.
  EXPECT_EQ(FindCallOp("torch.add", "add"), FindOp("add"));
  EXPECT_EQ(FindCallOp("add", "add"), FindOp("add"));
}

TEST(OpRegistry, ThunderAliasFlagsAreExactlyThunderList) {
  // thunder/examine/memory_calculation.py (lightning-thunder 0.2.6).
  const std::vector<std::string_view> thunder = {
      "unsqueeze", "squeeze",  "transpose", "expand",
      "reshape",   "torch_prims_reshape_impl", "permute", "contiguous",
      "split",     "torch_wait_prim_impl",     "shallow_copy"};
  EXPECT_EQ(ThunderAliasOps(), thunder);
  std::set<std::string_view> flagged;
  for (const OpInfo& op : AllOps()) {
    if (op.thunder_alias) flagged.insert(op.name);
  }
  EXPECT_EQ(flagged, std::set<std::string_view>(thunder.begin(), thunder.end()));
}

TEST(OpRegistry, FusionRegionsByNameAndUnknownOps) {
  EXPECT_EQ(FindOp("nvFusion3")->effect, OpEffect::kFusion);
  EXPECT_EQ(FindOp("TorchCompile0")->effect, OpEffect::kFusion);
  EXPECT_TRUE(IsFusionName("nvFusion12"));
  EXPECT_FALSE(IsFusionName("nvFusion"));
  EXPECT_FALSE(IsFusionName("nvFusionX"));
  EXPECT_EQ(FindOp("no_such_op"), nullptr);
}

TEST(OpRegistry, EveryNameIsRegisteredOnce) {
  std::set<std::string_view> names;
  for (const OpInfo& op : AllOps()) EXPECT_TRUE(names.insert(op.name).second) << op.name;
}

TEST(OpRegistry, WhatTheOpAuditFoundIsDeclared) {
  // Max pooling: int64 indices output 1, read back as argument 7.
  EXPECT_EQ(FindOp("max_pool2d_with_indices")->int64_indices_output, 1);
  EXPECT_EQ(FindOp("max_pool2d_with_indices_backward")->int64_indices_argument, 7);
  EXPECT_EQ(FindOp("max_pool2d_with_indices")->output_types, OutputTypes::kValuesAndIndices);
  EXPECT_EQ(FindOp("topk")->output_types, OutputTypes::kValuesAndIndices);
  // Thunder's ATen fallbacks find the operator's entry.
  EXPECT_EQ(FindOp("torch.ops.aten.embedding_backward"), FindOp("embedding_backward"));
  EXPECT_EQ(FindOp("torch.ops.aten.no_such_op"), nullptr);
  // Basic indexing is a view, advanced indexing allocates.
  EXPECT_EQ(FindOp("__getitem__")->effect, OpEffect::kViewOfInput);
  EXPECT_TRUE(FindOp("__getitem__")->allocates_with_tensor_argument);
  // Contiguous copies: softmax's input, embedding_backward's grad,
  // softmax backward's grad and output.
  EXPECT_EQ(FindOp("softmax")->contiguous_copy_arguments, 1u);
  EXPECT_EQ(FindOp("softmax")->layout, LayoutRule::kContiguous);
  EXPECT_EQ(FindOp("softmax_backward_data")->contiguous_copy_arguments, 3u);
  EXPECT_EQ(FindOp("sort")->scratch, ScratchRule::kSortDimBuffer);
  EXPECT_EQ(FindOp("silu")->scratch, ScratchRule::kNone);  // its `inplace` flag is no operand
  EXPECT_EQ(DescribeOp(*FindOp("matmul")),
            "allocates, contiguous, scratch: BLAS and matmul operand copies");
}

}  // namespace
}  // namespace peakmem

namespace peakmem {
namespace {

RecomputeCost CostOf(std::string_view symbol) {
  const OpInfo* op = FindOp(symbol);
  EXPECT_NE(op, nullptr) << symbol;
  return op == nullptr ? RecomputeCost::kNotRecomputed : RecomputeCostOf(*op);
}

// The planner recomputes views and pointwise ops cheaply, contractions,
// softmax and shallow_copy when a budget demands it, and never attention
// (sdpa's kernels), reductions, random ops or in-place ops.
TEST(RecomputeCost, ViewsPointwiseAndContractionsAreRecomputedOthersNever) {
  EXPECT_EQ(CostOf("mul"), RecomputeCost::kPerElement);
  EXPECT_EQ(CostOf("gelu"), RecomputeCost::kPerElement);
  EXPECT_EQ(CostOf("reshape"), RecomputeCost::kPerElement);  // a view or a copy
  EXPECT_EQ(CostOf("transpose"), RecomputeCost::kView);
  EXPECT_EQ(CostOf("shallow_copy"), RecomputeCost::kAlias);
  EXPECT_EQ(CostOf("matmul"), RecomputeCost::kContraction);
  EXPECT_EQ(CostOf("linear"), RecomputeCost::kContraction);
  EXPECT_EQ(CostOf("mm"), RecomputeCost::kContraction);
  EXPECT_EQ(CostOf("softmax"), RecomputeCost::kRowwise);
  EXPECT_EQ(CostOf("sum"), RecomputeCost::kNotRecomputed);
  EXPECT_EQ(CostOf("var_mean"), RecomputeCost::kNotRecomputed);
  EXPECT_EQ(CostOf("scaled_dot_product_attention"), RecomputeCost::kNotRecomputed);
  EXPECT_EQ(CostOf("dropout"), RecomputeCost::kNotRecomputed);
  EXPECT_EQ(CostOf("uniform"), RecomputeCost::kNotRecomputed);
  EXPECT_EQ(CostOf("add_"), RecomputeCost::kNotRecomputed);  // in place
  EXPECT_EQ(CostOf("copy_"), RecomputeCost::kNotRecomputed);  // returns an input it wrote
}

// linear(x f32[2, 3, 4], w f32[5, 4]) -> f32[2, 3, 5]: 30 outputs, each a
// dot product of length 4 (4 multiplies, 4 adds): 2 * 30 * 4 = 240.
TEST(RecomputeCost, FlopsByKind) {
  EXPECT_EQ(RecomputeFlops(RecomputeCost::kContraction, 30, 4), 240);
  EXPECT_EQ(RecomputeFlops(RecomputeCost::kPerElement, 30, 4), 30);
  EXPECT_EQ(RecomputeFlops(RecomputeCost::kRowwise, 30, 4), 30);
  EXPECT_EQ(RecomputeFlops(RecomputeCost::kView, 30, 4), 0);
  EXPECT_EQ(RecomputeFlops(RecomputeCost::kAlias, 30, 4), 0);
}

}  // namespace
}  // namespace peakmem
