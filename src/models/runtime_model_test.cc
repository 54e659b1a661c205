// The runtime model, tested by the allocation events it emits on small
// traces (as XLA's heap simulator tests record HeapSimulator calls): which
// storage is allocated and freed in which statement. f32[4] is 16 bytes;
// each sequence is derived by hand in its comment from the model's rules
// (runtime_model.h). The end-to-end numbers are checked against real PyTorch
// measurement elsewhere (tests/python/test_corpus_runtime.py).
#include "peakmem/models/runtime_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peakmem/sim/requested_bytes.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

struct Event {
  std::int32_t step;
  std::string value;  // the storage's value ("(scratch)" for scratch)
  std::int64_t delta;
  bool operator==(const Event&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Event& e) {
  return os << "{" << e.step << ", " << e.value << ", " << e.delta << "}";
}

std::vector<Event> EventsOf(const std::string& text, CallingConvention convention,
                            std::vector<ArgumentTensor> arguments = {}, int cpu_threads = 0) {
  const ParsedTrace parsed = Parse(text);
  ReportOptions options;
  options.alloc_log = true;
  const Report report = RunRuntimeModel(
      parsed,
      RuntimeOptions{.convention = convention, .cpu_threads = cpu_threads, .argument_tensors = std::move(arguments)},
      options);
  EXPECT_NE(report.alloc_log, nullptr);
  std::vector<Event> events;
  for (const AllocEvent& e : report.alloc_log->events) {
    const StorageRecord& s = report.alloc_log->storages[e.storage];
    const std::string name = s.role == StorageRole::kScratch
                                 ? "(scratch)"
                                 : std::string(parsed.trace.value(s.value).name);
    events.push_back({e.step, name, e.delta});
  }
  return events;
}

TEST(RuntimeModelEvents, ForwardCallerHoldsArgumentsDelFreesReturnKeepsTheResult) {
  // Arguments a, b (16 each) before the first statement; t0 at step 0, t1 at
  // step 1; `del t0` (step 2) frees t0; the return hands t1 to the caller,
  // and the caller holds a and b: nothing more is freed.
  const std::string text = R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t0 = torch.add(a, b)  # t0: "cpu f32[4]"
  t1 = torch.mul(t0, t0)  # t1: "cpu f32[4]"
  del t0
  return t1
)";
  const std::vector<Event> expected = {
      {-1, "a", 16}, {-1, "b", 16}, {0, "t0", 16}, {1, "t1", 16}, {2, "t0", -16}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, DTensorUnwrappedAndRewrappedAroundAnOpAllocatesOnlyTheOpsOutput) {
  // A newer printer's DTensor program: l_x_ is rank 0's shard of f32[16,
  // 16] split by columns over 2 ranks, f32[16, 8] (512 bytes), the caller's;
  // its inner tensor is a view (nothing), exp makes 512, construct_dtensor
  // wraps t21 (nothing); t21's storage is freed when t23, its last holder,
  // is: never here, it is returned.
  const std::string text = R"trace(def computation(l_x_):
  # l_x_: "DTensor cpu f32[16, 16] mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=1),)"
  t20 = get_dtensor_inner_tensor(l_x_)  # t20: "cpu f32[16, 8]"
  t21 = torch.exp(t20)  # t21: "cpu f32[16, 8]"
  del t20
  t23 = construct_dtensor(t21, DTensorSpec(mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=1),)))  # t23: "DTensor cpu f32[16, 16] mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=1),)"
  del t21
  return t23
)trace";
  const std::vector<Event> expected = {{-1, "l_x_", 512}, {1, "t21", 512}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, WrappedScalarIsAScratchAllocFreedInsideTheOp) {
  // torch.mul(a, 2.0) on f32: the 2.0 is wrapped in a 0-d double (8 bytes)
  // and cast to f32 (4 bytes), both alive with the output until the op
  // returns (scratch.h): t0 (16), then scratch 12 allocated and freed, all
  // at step 0.
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4]"
  return t0
)";
  const std::vector<Event> expected = {
      {-1, "a", 16}, {0, "t0", 16}, {0, "(scratch)", 12}, {0, "(scratch)", -12}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, HalfSumOfAnExpandedTensorReducesAFloat32Copy) {
  // torch.sum of bf16 [1, 6] expanded to [8, 6] (measured for [64, 48]:
  // result 2, then 4 + 4 * 3072 inside): here the result (2), then scratch
  // 4 * 48 + 4 = 196 allocated and freed. The transposed input below is
  // dense: the result alone.
  const std::string text = R"(def f(a, b):
  # a: "cpu bf16[1, 6]"
  # b: "cpu bf16[6, 8]"
  t0 = torch.expand(a, (8, 6))  # t0: "cpu bf16[8, 6]"
  t1 = torch.sum(t0, None, False, dtype=None)  # t1: "cpu bf16[]"
  t2 = torch.permute(b, (1, 0))  # t2: "cpu bf16[8, 6]"
  t3 = torch.sum(t2, None, False, dtype=None)  # t3: "cpu bf16[]"
  return t1, t3
)";
  const std::vector<Event> expected = {{-1, "a", 12},         {-1, "b", 96},          {1, "t1", 2},
                                       {1, "(scratch)", 196}, {1, "(scratch)", -196}, {3, "t3", 2}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, HalfIndexAddAccumulatesInAFloat32Buffer) {
  // bf16 index_add on the CPU (HalfIndexAddBuffer; measured, torch 2.13),
  // 2 threads. t0: self [64, 48], dim 0, rows of K = 48 >= 16 and a
  // contiguous source: per-thread rows, 4 * 2 * 48 = 384 beside the result
  // (6144). t1: dim 1 (the last): a float32 copy of the result,
  // 4 * 3072 = 12288. t2: self [8, 6], dim 0, K = 6 < 16: the copy,
  // 4 * 48 = 192. t3: float32: nothing inside.
  const std::string text = R"(def f(a, i, s0, s1, b, s2, c, s3):
  # a: "cpu bf16[64, 48]"
  # i: "cpu i64[5]"
  # s0: "cpu bf16[5, 48]"
  # s1: "cpu bf16[64, 5]"
  # b: "cpu bf16[8, 6]"
  # s2: "cpu bf16[5, 6]"
  # c: "cpu f32[8, 6]"
  # s3: "cpu f32[5, 6]"
  t0 = torch.index_add(a, 0, i, s0)  # t0: "cpu bf16[64, 48]"
  t1 = torch.index_add(a, 1, i, s1)  # t1: "cpu bf16[64, 48]"
  t2 = torch.index_add(b, 0, i, s2)  # t2: "cpu bf16[8, 6]"
  t3 = torch.index_add(c, 0, i, s3)  # t3: "cpu f32[8, 6]"
  return t0, t1, t2, t3
)";
  const std::vector<Event> expected = {
      {-1, "a", 6144},        {-1, "i", 40},           {-1, "s0", 480},        {-1, "s1", 640},
      {-1, "b", 96},          {-1, "s2", 60},          {-1, "c", 192},         {-1, "s3", 120},
      {0, "t0", 6144},        {0, "(scratch)", 384},   {0, "(scratch)", -384}, {1, "t1", 6144},
      {1, "(scratch)", 12288}, {1, "(scratch)", -12288}, {2, "t2", 96},         {2, "(scratch)", 192},
      {2, "(scratch)", -192}, {3, "t3", 192}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward, {}, 2), expected);
}

TEST(RuntimeModelEvents, BatchedProductCopiesAnOperandBlasCannotTake) {
  // [1, 64, 48] with stride 0 between rows (a row expanded) @ [1, 48, 64]:
  // 64 * 48 * 64 >= 400, so bmm hands the matrices to BLAS, which cannot
  // take a leading dimension of 0: a contiguous copy of the operand
  // (64 * 48 * 4 = 12288) beside the result (16384). At [1, 8, 6] @ [1, 6, 8]
  // (384 < 400) the naive kernel reads it as it is: the result alone.
  const std::string text = R"(def f(a, b, c, d):
  # a: "cpu f32[1, 48]"
  # b: "cpu f32[1, 48, 64]"
  # c: "cpu f32[1, 6, 8]"
  # d: "cpu f32[1, 6]"
  t0 = torch.expand(a, (1, 64, 48))  # t0: "cpu f32[1, 64, 48]"
  t1 = torch.matmul(t0, b)  # t1: "cpu f32[1, 64, 64]"
  t2 = torch.expand(d, (1, 8, 6))  # t2: "cpu f32[1, 8, 6]"
  t3 = torch.matmul(t2, c)  # t3: "cpu f32[1, 8, 8]"
  return t1, t3
)";
  const std::vector<Event> expected = {
      {-1, "a", 192},          {-1, "b", 12288}, {-1, "c", 192}, {-1, "d", 24}, {1, "t1", 16384},
      {1, "(scratch)", 12288},  {1, "(scratch)", -12288},           {3, "t3", 256}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, ProductsOfOneTypeAreCopiedByTheirOperandsStrides) {
  // The same product three times, a f32[2, 4] @ a f32[4, 4], the types alike
  // each time: b is contiguous (strides (4, 1): BLAS takes it as it is);
  // t1, b's type printed the same, is v's row expanded (strides (0, 1): a
  // leading dimension of 0, which BLAS cannot take), so the second product
  // copies it contiguous (4 * 4 * 4 = 64 bytes) beside its result (32).
  // The third, b again, copies nothing: an answer for one operand layout is
  // never given for another.
  const std::string text = R"(def f(a, b, v):
  # a: "cpu f32[2, 4]"
  # b: "cpu f32[4, 4]"
  # v: "cpu f32[1, 4]"
  t0 = torch.matmul(a, b)  # t0: "cpu f32[2, 4]"
  t1 = torch.expand(v, (4, 4))  # t1: "cpu f32[4, 4]"
  t2 = torch.matmul(a, t1)  # t2: "cpu f32[2, 4]"
  t3 = torch.matmul(a, b)  # t3: "cpu f32[2, 4]"
  return t0, t2, t3
)";
  const std::vector<Event> expected = {
      {-1, "a", 32}, {-1, "b", 64},          {-1, "v", 16},          {0, "t0", 32},
      {2, "t2", 32}, {2, "(scratch)", 64}, {2, "(scratch)", -64}, {3, "t3", 32}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, ViewsShareTheirBaseStorage) {
  // t1 = reshape of contiguous t0 is a view: no event of its own; t0's
  // storage is freed only when both names are gone (del t0 at step 2 frees
  // nothing, del t1 at step 3 frees t0's 16 bytes).
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = torch.reshape(t0, (2, 2))  # t1: "cpu f32[2, 2]"
  del t0
  del t1
  return a
)";
  const std::vector<Event> expected = {{-1, "a", 16}, {0, "t0", 16}, {3, "t0", -16}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, ReportNumbersEqualTheCounterOverTheLog) {
  // The report's peak and final bytes are what a replay of its own log
  // counts: 16 + 16 + 12 = 44 at the peak, 32 at the end.
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4]"
  return t0
)");
  ReportOptions options;
  options.alloc_log = true;
  const Report report = RunRuntimeModel(parsed, {}, options);
  RequestedBytesSink sink;
  Replay(*report.alloc_log, sink);
  EXPECT_EQ(report.peak_bytes, 44);
  EXPECT_EQ(sink.counter().peak(), 44);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(sink.counter().live(), 32);
  EXPECT_EQ(report.tensor_peak_bytes, 32);
}

// A backward whose saved tensors are w (a parameter the caller holds: no
// bytes, never freed), and v0, v1 (two views of one 32-byte forward
// activation: one storage). Cotangent g is its own 16 bytes.
//   arguments: w 0 (external), v0 32 (the group's storage), v1 shares it, g 16
//   t0 = mul(v0, g) at step 10: +16
//   del v0 (step 11): v1 still holds the storage; del v1 (step 12): -32
//   del g (step 13): -16
constexpr const char* kSavedViews = R"(def backward_fn(saved_for_backward, cotangents):
  # saved_for_backward: "Collection"
  # cotangents: "Collection"
  C0, C1, = saved_for_backward
  # C0: "Collection"
  # C1: "Collection"
  clear_mutable_collection(saved_for_backward)
  clear_mutable_collection(C1)
  del C1, saved_for_backward
  g, = cotangents
  # g: "cpu f32[4]"
  clear_mutable_collection(cotangents)
  del cotangents
  w, v0, v1, = C0
  # w: "cpu f32[4]"
  # v0: "cpu f32[4]"
  # v1: "cpu f32[4]"
  clear_mutable_collection(C0)
  del C0
  t0 = torch.mul(v0, g)  # t0: "cpu f32[4]"
  del v0
  del v1
  del g
  return (t0, w)
)";

TEST(RuntimeModelEvents, ArgumentTensorsCarryIdentityIntoATrace) {
  const std::vector<Event> expected = {{-1, "w", 0},   {-1, "v0", 32}, {-1, "g", 16},
                                       {10, "t0", 16}, {12, "v0", -32}, {13, "g", -16}};
  EXPECT_EQ(EventsOf(kSavedViews, CallingConvention::kBackward,
                     {{.name = "w", .external = true},
                      {.name = "v0", .storage_group = 0, .storage_bytes = 32},
                      {.name = "v1", .storage_group = 0, .storage_bytes = 32, .strides = {2}}}),
            expected);
}

TEST(RuntimeModelEvents, ReturnedTensorsNameTheirStorages) {
  // t0 is a 16-byte storage of its own; w is the caller's (a zero-byte
  // storage made for the saved argument).
  const ParsedTrace parsed = Parse(kSavedViews);
  ReportOptions options;
  options.returned_tensors = true;
  RuntimeOptions runtime;
  runtime.argument_tensors = {{.name = "w", .external = true}};
  const Report report = RunRuntimeModel(parsed, runtime, options);
  ASSERT_EQ(report.returned_tensors.size(), 2u);
  EXPECT_EQ(report.returned_tensors[0].name, "t0");
  EXPECT_EQ(report.returned_tensors[0].storage_bytes, 16);
  EXPECT_EQ(report.returned_tensors[0].strides, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(report.returned_tensors[0].role, StorageRole::kIntermediate);
  EXPECT_EQ(report.returned_tensors[1].name, "w");
  EXPECT_EQ(report.returned_tensors[1].storage_bytes, 0);
  EXPECT_EQ(report.returned_tensors[1].role, StorageRole::kSaved);
}

TEST(RuntimeModelEvents, ArgumentTensorStridesMustFitTheRank) {
  const ParsedTrace parsed = Parse(kSavedViews);
  RuntimeOptions runtime;
  runtime.argument_tensors = {{.name = "v0", .strides = {4, 1}}};
  try {
    RunRuntimeModel(parsed, runtime);
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'v0' is given 2 strides for a 1-d tensor"),
              std::string::npos)
        << e.what();
  }
}

TEST(RuntimeModelEvents, CollectivesAllocateTheirResultAndWaitReturnsIt) {
  // all_gather of f32[4] over 2 ranks: a fresh f32[8] (32 bytes) at step 0;
  // wait hands back that tensor (step 1 allocates nothing); `del ft0`
  // (step 2) frees nothing, t1 still holds it. reduce_scatter of t1: a
  // fresh f32[4] (16) at step 3. all_reduce clones its input (16, step 4)
  // unless skip_clone (its fifth argument) is True: then the future is the
  // input itself and step 5 allocates nothing. The return (step 6) frees
  // t1, the only thing not returned.
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  ft0 = torch_all_gather_prim_impl(a, _pg, True, None)  # ft0: "FUTURE thunder.devices.Device(type='cpu') f32[8]"
  t1 = torch_wait_prim_impl(ft0)  # t1: "cpu f32[8]"
  del ft0
  ft2 = torch_reduce_scatter_prim_impl(t1, _SUM, _pg, True, None)  # ft2: "FUTURE thunder.devices.Device(type='cpu') f32[4]"
  ft3 = torch_all_reduce_prim_impl(a, _SUM, _pg, True, False)  # ft3: "FUTURE thunder.devices.Device(type='cpu') f32[4]"
  ft4 = torch_all_reduce_prim_impl(a, _SUM, _pg, True, True)  # ft4: "FUTURE thunder.devices.Device(type='cpu') f32[4]"
  return (ft2, ft3, ft4)
)";
  const std::vector<Event> expected = {
      {-1, "a", 16}, {0, "ft0", 32}, {3, "ft2", 16}, {4, "ft3", 16}, {6, "ft0", -32}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, MaxPoolIndicesAreInt64WhateverTheTracePrints) {
  // Thunder types max_pool2d_with_indices' indices like the input (f32);
  // ATen makes them int64 (op_registry.h, int64_indices_output). Pooling
  // f32[1, 1, 4, 4] (64 bytes) by 2x2 windows, stride 2: values f32[1, 1, 2, 2]
  // (16 bytes), indices 4 elements at 8 bytes (32, not the printed 16). Both
  // are allocated at step 0; the text prints no types for them
  // (type_inference.cc infers them from the pooling arguments).
  const std::string text = R"(def f(a):
  # a: "cpu f32[1, 1, 4, 4]"
  (t0, t1) = max_pool2d_with_indices(a, 2, 2, 0, 1, False)
  return t0, t1
)";
  const std::vector<Event> expected = {{-1, "a", 64}, {0, "t0", 16}, {0, "t1", 32}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, MaxPoolBackwardTakesInt64Indices) {
  // The backward trace's argument t1 (printed f32[1, 1, 2, 2], 16 bytes) is
  // the indices max_pool2d_with_indices_backward reads as its eighth
  // argument: 32 bytes at run time. The gradient is like `a` (64 bytes).
  const std::string text = R"(def f(g, a, t1):
  # g: "cpu f32[1, 1, 2, 2]"
  # a: "cpu f32[1, 1, 4, 4]"
  # t1: "cpu f32[1, 1, 2, 2]"
  t2 = max_pool2d_with_indices_backward(g, a, 2, 2, 0, 1, False, t1)  # t2: "cpu f32[1, 1, 4, 4]"
  return t2
)";
  const std::vector<Event> expected = {{-1, "g", 16}, {-1, "a", 64}, {-1, "t1", 32}, {0, "t2", 64}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelDiagnostics, AnUnknownOpSaysWhetherItCouldMoveThePeak) {
  // frobnicate (unknown) runs at line 4, before the peak's statement (t1 at
  // line 5: a, t0 and t1 alive, 48 bytes); later_op runs at line 7, after
  // `del t0, t1` left only a: it cannot change the peak.
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  t0 = frobnicate(a)  # t0: "cpu f32[4]"
  t1 = torch.mul(t0, t0)  # t1: "cpu f32[4]"
  del t0, t1
  t2 = later_op(a)  # t2: "cpu f32[4]"
  return t2
)";
  const Report report = testing_util::Run(text, "runtime");
  EXPECT_EQ(report.peak_bytes, 48);
  ASSERT_EQ(report.diagnostics.size(), 2u);
  EXPECT_EQ(
      report.diagnostics[0],
      "op 'frobnicate' (first at line 3, 1 call) is not in peakmem's op registry; counted as "
      "allocating its outputs; the peak (at line 4) may be off by what it allocates inside or if "
      "its output is a view");
  EXPECT_EQ(
      report.diagnostics[1],
      "op 'later_op' (first at line 6, 1 call) is not in peakmem's op registry; counted as "
      "allocating its outputs; the peak (at line 4) comes before it: only the live bytes after it "
      "and the final bytes may be off");
}

TEST(RuntimeModelEvents, WhereWithAPrintedInfinityMakesItsScalarTensor) {
  // Thunder prints -inf as `-float('inf')`: a Python number, so where takes
  // its ScalarOther overload and makes a 0-d f32 scalar_tensor (4 bytes)
  // beside its output (scratch.h), as the live trace's float constant does.
  const std::string text = R"(def f(c, x):
  # c: "cpu b8[4]"
  # x: "cpu f32[4]"
  t0 = torch.where(c, x, -float('inf'))  # t0: "cpu f32[4]"
  return t0
)";
  const std::vector<Event> expected = {
      {-1, "c", 4}, {-1, "x", 16}, {0, "t0", 16}, {0, "(scratch)", 4}, {0, "(scratch)", -4}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, BasicIndexingIsAViewAndATensorIndexAllocates) {
  // x[:, None, 1:] of f32[2, 4] (32 bytes) is a view: t0 makes no storage.
  // x[i] with an int64 index tensor is advanced indexing: a fresh f32[3, 4]
  // (48 bytes).
  const std::string text = R"(def f(x, i):
  # x: "cpu f32[2, 4]"
  # i: "cpu i64[3]"
  t0 = Tensor.__getitem__(x, (slice(None, None, None), None, slice(1, None, None)))  # t0: "cpu f32[2, 1, 3]"
  t1 = Tensor.__getitem__(x, i)  # t1: "cpu f32[3, 4]"
  return t0, t1
)";
  const std::vector<Event> expected = {{-1, "x", 32}, {-1, "i", 24}, {1, "t1", 48}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, MatmulOfPermutedHeadsCopiesBothOperands) {
  // q [2, 4, 8, 16] viewed from [2, 8, 4, 16] by permute(0, 2, 1, 3): its
  // batch dims (2, 4) have strides (512, 16), which do not merge (512 !=
  // 16 * 4), so matmul's reshape to [8, 8, 16] copies q (4,096 bytes), and
  // likewise q^T; the output f32[2, 4, 8, 8] is 2,048 bytes. The copies
  // live with the output until the product returns.
  const std::string text = R"(def f(x):
  # x: "cpu f32[2, 8, 4, 16]"
  t0 = torch.permute(x, (0, 2, 1, 3))  # t0: "cpu f32[2, 4, 8, 16]"
  t1 = torch.transpose(t0, -1, -2)  # t1: "cpu f32[2, 4, 16, 8]"
  t2 = torch.matmul(t0, t1)  # t2: "cpu f32[2, 4, 8, 8]"
  return t2
)";
  const std::vector<Event> expected = {
      {-1, "x", 4096}, {2, "t2", 2048}, {2, "(scratch)", 8192}, {2, "(scratch)", -8192}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

}  // namespace
}  // namespace peakmem
