// The world size a trace says, on hand-written traces: an all-gather of
// f32[4] into f32[16] says 4, a reduce-scatter of f32[8, 2] into f32[2, 2]
// says 4, a DTensor mesh (2, 3) says 6.
#include "peakmem/semantics/distribution.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

constexpr const char* kGather = R"(def f(a):
  # a: "cpu f32[4]"
  ft0 = torch_all_gather_prim_impl(a, _pg, True, None)  # ft0: "FUTURE thunder.devices.Device(type='cpu') f32[16]"
  t1 = torch_wait_prim_impl(ft0)  # t1: "cpu f32[16]"
  return t1
)";

Distribution Of(const ParsedTrace& p, int rank = 0, int world_size = 0) {
  return DistributionOf(p.trace, *p.source, rank, world_size);
}

TEST(Distribution, AllGatherSaysTheWorldSize) {
  const ParsedTrace p = Parse(kGather);
  const Distribution d = Of(p, 3);
  EXPECT_TRUE(d.distributed);
  EXPECT_EQ(d.world_size, 4);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.world_size_from, "the torch_all_gather_prim_impl at line 3");
  EXPECT_EQ(d.collective_ops, std::vector<std::string>{"torch_all_gather_prim_impl"});  // not the wait
  EXPECT_THROW(Of(p, 4), std::invalid_argument);  // rank 4 of 4
  try {
    Of(p, 0, 8);
    FAIL() << "a contradicted --world-size accepted";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "--world-size 8 was given, but the torch_all_gather_prim_impl at line 3 says 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(Distribution, ReduceScatterAlongAGivenDimension) {
  // reduce_scatter(a, op, group, do_async, dim=0): f32[8, 2] -> f32[2, 2].
  const ParsedTrace p = Parse(R"(def f(a):
  # a: "cpu f32[8, 2]"
  ft0 = torch_reduce_scatter_prim_impl(a, _SUM, _pg, True, 0)  # ft0: "FUTURE thunder.devices.Device(type='cpu') f32[2, 2]"
  t1 = torch_wait_prim_impl(ft0)  # t1: "cpu f32[2, 2]"
  return t1
)");
  EXPECT_EQ(Of(p).world_size, 4);
}

TEST(Distribution, AllReduceSaysNothingAndAGivenSizeIsUsed) {
  const ParsedTrace p = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  ft0 = torch_all_reduce_prim_impl(a, _SUM, _pg, True, False)  # ft0: "FUTURE thunder.devices.Device(type='cpu') f32[4]"
  t1 = torch_wait_prim_impl(ft0)  # t1: "cpu f32[4]"
  return t1
)");
  const Distribution unknown = Of(p);
  EXPECT_TRUE(unknown.distributed);
  EXPECT_EQ(unknown.world_size, 0);
  const Distribution given = Of(p, 1, 2);
  EXPECT_EQ(given.world_size, 2);
  EXPECT_EQ(given.world_size_from, "given");
}

TEST(Distribution, DTensorMeshSaysTheProductOfItsShape) {
  const ParsedTrace p = Parse(R"T(def f(a):
  # a: "DTensor cpu f32[12] mesh=DeviceMesh((dp=2, tp=3), 'cpu', stride=(3, 1)), placements=(Replicate(), Shard(dim=0))"
  return a
)T");
  const Distribution d = Of(p);
  EXPECT_EQ(d.world_size, 6);
  EXPECT_EQ(d.world_size_from,
            "the DTensor mesh of 'a' (line 1)");  // a parameter: defined on the def line
}

TEST(Distribution, GroupsOfDifferentSizesAreReportedNotFatal) {
  const ParsedTrace p = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  ft0 = torch_all_gather_prim_impl(a, _pg, True, None)  # ft0: "FUTURE thunder.devices.Device(type='cpu') f32[16]"
  ft1 = torch_all_gather_prim_impl(a, _pg2, True, None)  # ft1: "FUTURE thunder.devices.Device(type='cpu') f32[8]"
  return (ft0, ft1)
)");
  const Distribution d = Of(p);
  EXPECT_EQ(d.world_size, 4);
  ASSERT_EQ(d.disagreements.size(), 1u);
  EXPECT_NE(d.disagreements[0].find("at line 4 says a world size of 2"), std::string::npos)
      << d.disagreements[0];
}

TEST(Distribution, APlainTraceIsNotDistributed) {
  const ParsedTrace p = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_FALSE(Of(p).distributed);
}

}  // namespace
}  // namespace peakmem
