// The `thunder` model (peakmem/thunder_model.h): Thunder's get_alloc_memory,
// rule by rule (the alias rule and clears: thunder_model_alias_test.cc).
// Every expected number below is derived by hand in the comment above it,
// from the rules in thunder_model.h; f32[4] is 16 bytes throughout.
#include "peakmem/models/thunder_model.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "peakmem/analyze.h"
#include "peakmem/semantics/op_registry.h"
#include "thunder_model_test_util.h"

namespace peakmem {
namespace {

using testing_util::Breakdown;
using testing_util::ExpectConsistent;
using testing_util::FindValue;
using testing_util::Items;
using testing_util::Parse;
using thunder_model_test::LiveBytes;
using thunder_model_test::RunChecked;

// ---------------------------------------------------------------- alias list

TEST(ThunderAliasOps, IsThunderList) {
  const std::vector<std::string_view> expected = {
      "unsqueeze", "squeeze",  "transpose", "expand",
      "reshape",   "torch_prims_reshape_impl", "permute", "contiguous",
      "split",     "torch_wait_prim_impl",     "shallow_copy"};
  EXPECT_EQ(ThunderAliasOps(), expected);
}

// ---------------------------------------------------------------- packed fp4

// Thunder sizes f4_e2m1fn_x2 at half a byte per element (dtypes.py:
// bytes=0.5); PyTorch allocates a byte per element (itemsize 1). The thunder
// model counts as Thunder does, the runtime model as PyTorch does.
TEST(ThunderModel, PackedFp4CountsHalfAByteAsThunderDoes) {
  // b = neg(a), a and b f4_e2m1fn_x2[4]: a: +4 * 0.5 = 2 up front; b: +2,
  // peak 4 (a's 2 + b's 2). The runtime model: 4 + 4 = 8 bytes.
  const std::string text = R"(def f(a):
  # a: "cpu f4_e2m1fn_x2[4]"
  b = torch.neg(a)  # b: "cpu f4_e2m1fn_x2[4]"
  return b
)";
  const Report thunder = RunChecked(text);
  EXPECT_EQ(thunder.peak_bytes, 4);
  EXPECT_EQ(Analyze(Parse(text), "runtime").peak_bytes, 8);
}

TEST(ThunderModel, PackedFp4OfOddLengthIsAnErrorNotARoundedNumber) {
  // a: f4_e2m1fn_x2[3]: Thunder's count is 1.5 bytes, a float; the error
  // names the argument's line (2) and what the runtime model counts (3).
  const std::string text = R"(def f(a):
  # a: "cpu f4_e2m1fn_x2[3]"
  return a
)";
  try {
    RunThunderModel(Parse(text));
    ADD_FAILURE() << "expected an error";
  } catch (const TraceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("t.trace:"), std::string::npos) << message;
    EXPECT_NE(message.find("as 1.5 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("counts the 3 bytes PyTorch allocates"), std::string::npos) << message;
  }
  EXPECT_EQ(Analyze(Parse(text), "runtime").final_bytes, 3);
}

// ---------------------------------------------------------------- arguments

TEST(ThunderModel, TraceThatOnlyReturnsItsArgumentHasPeakZero) {
  // a: +16 up front. `return` is skipped, so the peak (which starts at 0) is
  // never updated: peak 0, final 16.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  return a
)");
  EXPECT_EQ(report.model, "thunder");
  EXPECT_EQ(report.trace_name, "t.trace");
  EXPECT_EQ(report.peak_bytes, 0);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(report.peak_step, -1);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

TEST(ThunderModel, UnpackDoesNotUpdateThePeak) {
  // Argument leaf t0: 16 up front; the unpack and the return are skipped.
  // peak 0, final 16.
  const Report report = RunChecked(R"(def f(cotangents):
  # cotangents: "Collection"
  t0, = cotangents
  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_EQ(report.peak_bytes, 0);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument t0", 16}}));
}

TEST(ThunderModel, DelOfAnArgumentFreesNothing) {
  // a: 16, two references.
  //   t0 = neg(a)   +16 -> 32   peak 32
  //   del a         a 2 -> 1, nothing freed -> 32
  // peak 32, final 32; no "python_del a" key.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  del a
  return t0
)");
  EXPECT_EQ(report.peak_bytes, 32);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"neg t0", 16}}));
}

TEST(ThunderModel, DelOfAnArgumentUpdatesThePeak) {
  // a: 16. `del a` is not skipped, so the peak becomes the live 16 after it.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  del a
  return None
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.peak_step, 0);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

TEST(ThunderModel, ArgumentsAreCountedInSignatureOrderDepthFirst) {
  // Leaves of (saved, cot) depth first: saved -> C0 -> (x, y), then saved's
  // second element z, then cot -> g. Sizes 4, 8, 12, 16 (f32[1..4]) = 40, no op.
  const Report report = RunChecked(R"(def backward_fn(saved, cot):
  # saved: "Collection"
  # cot: "Collection"
  C0, z, = saved
  # C0: "Collection"
  # z: "cpu f32[3]"
  g, = cot
  # g: "cpu f32[4]"
  x, y, = C0
  # x: "cpu f32[1]"
  # y: "cpu f32[2]"
  return None
)");
  EXPECT_EQ(Items(report), (Breakdown{{"argument x", 4},
                                      {"argument y", 8},
                                      {"argument z", 12},
                                      {"argument g", 16}}));
  EXPECT_EQ(report.final_bytes, 40);
  EXPECT_EQ(report.peak_bytes, 0);
}

TEST(ThunderModel, FutureTensorArgumentIsCounted) {
  // a: FUTURE f32[4] = 16. torch_wait_prim_impl is an alias: +0, live 16,
  // peak 16. del t0: refs 3 -> 2, nothing. peak 16, final 16.
  const Report report = RunChecked(R"(def f(a):
  # a: "FUTURE cuda:0 f32[4]"
  t0 = torch_wait_prim_impl(a)  # t0: "cuda:0 f32[4]"
  del t0
  return None
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

TEST(ThunderModel, NumberArgumentCountsZeroWithADiagnostic) {
  const Report report = RunChecked(R"(def f(a, b=2):
  # a: "cpu f32[4]"
  # b: "int 2"
  return a
)");
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
  ASSERT_EQ(report.diagnostics.size(), 1u);
  EXPECT_EQ(report.diagnostics[0],
            "argument 'b' is a number, not a tensor; Thunder's get_alloc_memory would raise on "
            "it, peakmem counts it as 0 bytes");
}

TEST(ThunderModel, UnusedUntypedArgumentCountsZeroWithADiagnostic) {
  const Report report = RunChecked(R"(def f(a, b):
  # a: "cpu f32[4]"
  return a
)");
  EXPECT_EQ(report.final_bytes, 16);
  ASSERT_EQ(report.diagnostics.size(), 1u);
  EXPECT_EQ(report.diagnostics[0],
            "argument 'b' has no type comment and is never used; counted as 0 bytes");
}

TEST(ThunderModel, CollectionArgumentNeverUnpackedCountsAsEmpty) {
  const Report report = RunChecked(R"(def f(c):
  # c: "Collection"
  return None
)");
  EXPECT_EQ(report.final_bytes, 0);
  EXPECT_TRUE(Items(report).empty());
  ASSERT_EQ(report.diagnostics.size(), 1u);
  EXPECT_EQ(report.diagnostics[0],
            "the contents of collection argument 'c' are never unpacked; counted as empty");
}

// ---------------------------------------------------------------- default rule

TEST(ThunderModel, DelOfAnOpOutputFreesIt) {
  //   t0 = neg(a)   +16 -> 32
  //   t1 = exp(t0)  +16 -> 48   peak
  //   del t0        t0 1 -> 0: -16 -> 32, key "python_del t0"
  // peak 48 at step 1, final 32.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = torch.exp(t0)  # t1: "cpu f32[4]"
  del t0
  return t1
)");
  EXPECT_EQ(report.peak_bytes, 48);
  EXPECT_EQ(report.peak_step, 1);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(LiveBytes(report), (std::vector<std::int64_t>{32, 48, 32, 32}));
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"neg t0", 16},
                                      {"exp t1", 16},
                                      {"python_del t0", -16}}));
}

TEST(ThunderModel, KeyUsesTheLastDottedComponentOfTheCallee) {
  // x: f32[2, 3] = 24, w: f32[4, 3] = 48 -> 72. linear: f32[2, 4] = +32 -> 104.
  const Report report = RunChecked(R"(def f(x, w):
  # x: "cpu f32[2, 3]"
  # w: "cpu f32[4, 3]"
  t0 = torch.nn.functional.linear(x, w, None)  # t0: "cpu f32[2, 4]"
  return t0
)");
  EXPECT_EQ(report.peak_bytes, 104);
  EXPECT_EQ(report.final_bytes, 104);
  EXPECT_EQ(Items(report),
            (Breakdown{{"argument x", 24}, {"argument w", 48}, {"linear t0", 32}}));
}

TEST(ThunderModel, KeyJoinsSeveralOutputsWithCommas) {
  // a: 16. var_mean -> t0 f32[] (4) and t1 f32[] (4): +8 -> 24.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  (t0, t1) = torch.var_mean(a)
  # t0: "cpu f32[]"
  # t1: "cpu f32[]"
  return (t0, t1)
)");
  EXPECT_EQ(report.peak_bytes, 24);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"var_mean t0, t1", 8}}));
}

TEST(ThunderModel, OpWithoutTensorOutputsWritesAnEmptyNameList) {
  // Neither op has a tensor output: keys "name " with 0; live stays 16, and
  // since these ops are not skipped the peak becomes 16.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  torch._C._set_grad_enabled(False)
  i0 = Tensor.item(a)  # i0: "float 0.5"
  return a
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report),
            (Breakdown{{"argument a", 16}, {"_set_grad_enabled ", 0}, {"item ", 0}}));
}

TEST(ThunderModel, IgnoredOutputsAreNotNamed) {
  // (t0, _) = var_mean(a): only t0 is a flat output: +4 -> 20.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  (t0, _) = torch.var_mean(a)  # t0: "cpu f32[]"
  return t0
)");
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"var_mean t0", 4}}));
  EXPECT_EQ(report.final_bytes, 20);
}

TEST(ThunderModel, DefaultRuleAllocatesAnOutputThatIsAnInput) {
  // Thunder's default rule sums every tensor output, even one that is an
  // input ("skip when the function returns its own input" only skips the
  // re-registration). The printed text cannot rebind a live name, so the
  // output is pointed at the argument in the IR.
  //   a: 16; op returns a: +16 -> 32 peak; key "add_ a".
  ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = Tensor.add_(a, a)  # t0: "cpu f32[4]"
  return a
)");
  Statement& op = parsed.trace.statements[0];
  op.outputs.value = parsed.trace.params[0].value;
  const Report report = RunThunderModel(parsed);
  EXPECT_EQ(report.peak_bytes, 32);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"add_ a", 16}}));
}

TEST(ThunderModel, OutputThatIsAnInputKeepsItsReferenceCount) {
  // As above, then `del a` drops a's count 2 -> 1: nothing freed (the op did
  // not register a again with a fresh count of 1).
  ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = Tensor.add_(a, a)  # t0: "cpu f32[4]"
  del a
  return None
)");
  parsed.trace.statements[0].outputs.value = parsed.trace.params[0].value;
  const Report report = RunThunderModel(parsed);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"add_ a", 16}}));
}

TEST(ThunderModel, RepeatedKeysKeepFirstPositionAndTakeLatestValue) {
  //   t0 = cat([a])      +16 -> 32   "cat t0" = 16
  //   del t0             -16 -> 16   "python_del t0" = -16
  //   t0 = cat([a, a])   +32 -> 48   "cat t0" = 32 (keeps position 2)  peak
  //   del t0             -32 -> 16   "python_del t0" = -32
  //   t1 = exp(a)        +16 -> 32   "exp t1"
  // peak 48, final 32.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.cat([a], 0)  # t0: "cpu f32[4]"
  del t0
  t0 = torch.cat([a, a], 0)  # t0: "cpu f32[8]"
  del t0
  t1 = torch.exp(a)  # t1: "cpu f32[4]"
  return t1
)");
  EXPECT_EQ(report.peak_bytes, 48);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"cat t0", 32},
                                      {"python_del t0", -32},
                                      {"exp t1", 16}}));
}

TEST(ThunderModel, UnknownOpsAreListedInDiagnostics) {
  // frobnicate is not in the registry; it still allocates: 16 + 16 + 16 = 48.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = my.frobnicate(a)  # t0: "cpu f32[4]"
  t1 = my.frobnicate(t0)  # t1: "cpu f32[4]"
  return t1
)");
  EXPECT_EQ(report.peak_bytes, 48);
  EXPECT_EQ(Items(report),
            (Breakdown{{"argument a", 16}, {"frobnicate t0", 16}, {"frobnicate t1", 16}}));
  ASSERT_EQ(report.diagnostics.size(), 1u);
  EXPECT_EQ(report.diagnostics[0],
            "op 'frobnicate' (first at line 3, 2 calls) is not in peakmem's op registry; "
            "counted as allocating its outputs, as Thunder does");
}

TEST(ThunderModel, KnownOpsGiveNoDiagnostics) {
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.mul(a, a)  # t0: "cpu f32[4]"
  [t1] = nvFusion3(t0)
    # t1 = prims.neg(t0)  # t1: "cpu f32[4]"
  return t1
)");
  EXPECT_TRUE(report.diagnostics.empty());
}

// ---------------------------------------------------------------- steps

TEST(ThunderModel, StepsDescribeEveryStatement) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  del t0
  return a
)");
  const Report report = RunThunderModel(parsed);
  ASSERT_EQ(report.steps.size(), 3u);
  EXPECT_EQ(report.steps[0].op, "neg");
  EXPECT_EQ(report.steps[0].line, 3);
  EXPECT_EQ(report.steps[0].source, "t0 = torch.neg(a)  # t0: \"cpu f32[4]\"");
  EXPECT_EQ(report.steps[0].delta_bytes, 16);
  EXPECT_EQ(report.steps[0].live_bytes, 32);
  EXPECT_EQ(report.steps[1].op, "python_del");
  EXPECT_EQ(report.steps[1].delta_bytes, -16);
  EXPECT_EQ(report.steps[1].live_bytes, 16);
  EXPECT_EQ(report.steps[2].op, "python_return");
  EXPECT_EQ(report.steps[2].delta_bytes, 0);
  EXPECT_EQ(report.steps[2].line, 5);
}

// ---------------------------------------------------------------- reference traces

TEST(ThunderModel, NvFusionBroadcastForwardReference) {
  // a: f32[4] = 16, b: f32[2, 2] = 16 -> 32.
  // nvFusion0's outputs take their types from the subsymbols:
  //   t14: f32[1, 1, 4] = 16, t15: f32[2, 3, 4] = 96 -> +112 -> 144 (peak).
  // The return is skipped: final 144.
  const ParsedTrace parsed = LoadTrace(PEAKMEM_TEST_DATA_DIR "/nvfusion_broadcast_fw.trace");
  const Report report = Analyze(parsed, "thunder");
  ExpectConsistent(parsed, report);
  EXPECT_EQ(report.peak_bytes, 144);
  EXPECT_EQ(report.final_bytes, 144);
  EXPECT_EQ(report.peak_step, 0);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"argument b", 16},
                                      {"nvFusion0 t14, t15", 112}}));
  EXPECT_TRUE(report.diagnostics.empty());
}

// The backward of x * y * z, as Thunder printed it (CPU, torch executor).
constexpr const char* kMulBackward = R"(# Constructed by Delete Last Used (took 0 milliseconds)
import torch
from thunder.executors.torchex import no_autocast

@torch.no_grad()
@no_autocast
def backward_fn(saved_for_backward, cotangents):
  # saved_for_backward: "Collection"
  # cotangents: "Collection"
  C0, C1, = saved_for_backward
  # C0: "Collection"
  # C1: "Collection"
  clear_mutable_collection(saved_for_backward)
  clear_mutable_collection(C1)
  del C1, saved_for_backward
  t7, = cotangents
  # t7: "cpu f32[4]"
  clear_mutable_collection(cotangents)
  del cotangents
  z, t16, y, x, = C0
  # z: "cpu f32[4]"
  # t16: "cpu f32[4]"
  # y: "cpu f32[4]"
  # x: "cpu f32[4]"
  clear_mutable_collection(C0)
  del C0
  t18 = torch.mul(z, t7)  # t18: "cpu f32[4]"
    # t18 = ltorch.mul(z, t7)  # t18: "cpu f32[4]"
      # t18 = prims.mul(z, t7)  # t18: "cpu f32[4]"
  del z
  t19 = torch.mul(t16, t7)  # t19: "cpu f32[4]"
  del t16, t7
  t20 = torch.mul(y, t18)  # t20: "cpu f32[4]"
  del y
  t21 = torch.mul(x, t18)  # t21: "cpu f32[4]"
  del x, t18
  return (t20, t21, t19)
)";

TEST(ThunderModel, MulBackwardMatchesThunder) {
  // Arguments, depth first: saved_for_backward -> C0 -> z, t16, y, x (C1 is
  // never unpacked: empty), then cotangents -> t7. 5 x 16 = 80, count 2 each.
  //   clear(saved_for_backward)  direct elements C0, C1 are collections: 0 -> 80, peak 80
  //   clear(C1), del C1, saved_for_backward: 0
  //   clear(cotangents)          t7 2 -> 1: 0
  //   del cotangents, clear(C0) (not an argument), del C0: 0
  //   t18 = mul(z, t7)    +16 -> 96
  //   del z               z 2 -> 1: 0
  //   t19 = mul(t16, t7)  +16 -> 112
  //   del t16, t7         t16 2 -> 1; t7 1 -> 0: -16 "python_del t7" -> 96
  //   t20 = mul(y, t18)   +16 -> 112
  //   del y               0
  //   t21 = mul(x, t18)   +16 -> 128  peak (statement 16)
  //   del x, t18          x 2 -> 1; t18 1 -> 0: -16 "python_del t18" -> 112
  // Peak 128 as Thunder reported. Final: the sum of Thunder's own breakdown,
  // 80 + 16 + 16 - 16 + 16 + 16 - 16 = 112 (the saved x, y, z, t16 are never
  // freed, because they sit one level down, in C0).
  const ParsedTrace parsed = Parse(kMulBackward);
  const Report report = Analyze(parsed, "thunder");
  ExpectConsistent(parsed, report);
  EXPECT_EQ(report.peak_bytes, 128);
  EXPECT_EQ(report.peak_step, 16);
  EXPECT_EQ(report.final_bytes, 112);
  EXPECT_EQ(Items(report), (Breakdown{{"argument z", 16},
                                      {"argument t16", 16},
                                      {"argument y", 16},
                                      {"argument x", 16},
                                      {"argument t7", 16},
                                      {"mul t18", 16},
                                      {"mul t19", 16},
                                      {"python_del t7", -16},
                                      {"mul t20", 16},
                                      {"mul t21", 16},
                                      {"python_del t18", -16}}));
  ASSERT_EQ(report.diagnostics.size(), 1u);
  EXPECT_NE(report.diagnostics[0].find("'C1'"), std::string::npos) << report.diagnostics[0];
}

TEST(ThunderModel, FinalBytesAreTheSumOfTheBreakdownWhenKeysAreUnique) {
  const Report report = Analyze(Parse(kMulBackward), "thunder");
  std::int64_t sum = 0;
  for (const auto& [key, bytes] : Items(report)) sum += bytes;
  EXPECT_EQ(sum, report.final_bytes);
}

}  // namespace
}  // namespace peakmem

namespace peakmem {
namespace {

// ---------------------------------------------------------------- event stream

TEST(ThunderModelEvents, AliasOutputsShareTheirSourcesStorageUntilTheLastReferenceDies) {
  // Thunder's MemoryData: a (argument, count 2, 16 bytes) at step -1; t0
  // (count 1, 16 bytes) at step 0; the alias op reshape adds a reference to
  // t0's data (count 2) and allocates nothing; `del t0` drops it to 1, `del
  // t1` to 0, which frees t0's 16 bytes at step 3.
  const ParsedTrace parsed = testing_util::Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = torch.reshape(t0, (2, 2))  # t1: "cpu f32[2, 2]"
  del t0
  del t1
  return a
)");
  ReportOptions options;
  options.alloc_log = true;
  const Report report = RunThunderModel(parsed, options);
  ASSERT_NE(report.alloc_log, nullptr);
  std::vector<std::tuple<std::int32_t, std::string, std::int64_t>> events;
  for (const AllocEvent& e : report.alloc_log->events) {
    const StorageRecord& s = report.alloc_log->storages[e.storage];
    events.emplace_back(e.step, std::string(parsed.trace.value(s.value).name), e.delta);
  }
  const std::vector<std::tuple<std::int32_t, std::string, std::int64_t>> expected = {
      {-1, "a", 16}, {0, "t0", 16}, {3, "t0", -16}};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(report.peak_bytes, 32);
  EXPECT_EQ(report.final_bytes, 16);
}

}  // namespace
}  // namespace peakmem
