// Fusion output sizes (fusion.h) on the bundled nvFuser trace
// (tests/data/nvfusion_broadcast_fw.md): t15 [2, 3, 4] is computed from
// inputs broadcast from [1, 1, 4] in dims 0 and 1, so nvFuser returns it
// with strides (0, 0, 1): 4 floats, 16 bytes, not the dense 96; t14
// [1, 1, 4] is dense, 16 bytes.
#include "peakmem/semantics/fusion.h"

#include <gtest/gtest.h>

#include "peakmem/analyze.h"
#include "test_util.h"

namespace peakmem {
namespace {

TEST(Fusion, BroadcastOutputsAreSizedByTheirStrideZeroLayout) {
  const ParsedTrace parsed = LoadTrace(std::string(PEAKMEM_TEST_DATA_DIR) + "/nvfusion_broadcast_fw.trace");
  const Trace& trace = parsed.trace;
  const Statement* fusion = nullptr;
  for (const Statement& s : trace.statements) {
    if (s.kind == StatementKind::kCall && trace.SymbolOf(s) == "nvFusion0") fusion = &s;
  }
  ASSERT_NE(fusion, nullptr);
  EXPECT_TRUE(UsesSubSymbols("nvFusion0"));
  const Value* t14 = testing_util::FindValue(trace, "t14");
  const Value* t15 = testing_util::FindValue(trace, "t15");
  ASSERT_NE(t14, nullptr);
  ASSERT_NE(t15, nullptr);
  EXPECT_EQ(FusionOutputBytes(trace, *fusion, static_cast<ValueId>(t14 - trace.values.data())), 16);
  EXPECT_EQ(FusionOutputBytes(trace, *fusion, static_cast<ValueId>(t15 - trace.values.data())), 16);
}

}  // namespace
}  // namespace peakmem
