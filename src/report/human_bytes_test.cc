#include "peakmem/report/human_bytes.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace peakmem {
namespace {

TEST(HumanBytes, BinaryUnitsByHand) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(61030), "59.6 KiB");              // 61030 / 1024 = 59.599...
  EXPECT_EQ(HumanBytes(1258291), "1.2 MiB");             // 1258291 / 2^20 = 1.19999...
  EXPECT_EQ(HumanBytes(85899345920), "80.00 GiB");       // 80 x 2^30
  EXPECT_EQ(HumanBytes(-3704409866), "-3.45 GiB");       // 3704409866 / 2^30 = 3.4500...
  EXPECT_EQ(HumanBytes(std::int64_t{3} << 40), "3072.00 GiB");  // the largest unit is GiB
}

TEST(HumanBytes, GroupedBytesGroupsThousands) {
  EXPECT_EQ(GroupedBytes(0), "0");
  EXPECT_EQ(GroupedBytes(-8), "-8");
  EXPECT_EQ(GroupedBytes(999), "999");
  EXPECT_EQ(GroupedBytes(1000), "1,000");
  EXPECT_EQ(GroupedBytes(25'769'803'776), "25,769,803,776");
  EXPECT_EQ(GroupedBytes(-362'580'984), "-362,580,984");
  EXPECT_EQ(GroupedBytes(INT64_MIN), "-9,223,372,036,854,775,808");
}

}  // namespace
}  // namespace peakmem
