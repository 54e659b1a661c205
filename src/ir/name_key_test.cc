// NameKey (peakmem/name_key.h): a name-table key holding names of up to 15
// bytes in itself and viewing longer ones. Whatever it holds must read back,
// hash and compare exactly as the name itself.
#include "peakmem/ir/name_key.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/container/flat_hash_map.h"

namespace peakmem {
namespace {

TEST(NameKey, EveryLengthReadsBackAsTheName) {
  // 0..15 bytes are held inline, 16 and more viewed: both sides of the edge.
  const std::string text = "t_transformer_h_0_attn_c_attn_weight_and_then_some_more";
  for (std::size_t n = 0; n <= text.size(); ++n) {
    const std::string_view name(text.data(), n);
    const NameKey key(name);
    EXPECT_EQ(key.view(), name) << n;
    EXPECT_EQ(key.view().size(), n);
    // Short names are copies (not views of `text`); long ones are views.
    EXPECT_EQ(key.view().data() == text.data(), n > NameKey::kInline) << n;
    EXPECT_EQ(NameKeyHash()(key), NameKeyHash()(name)) << n;
    EXPECT_EQ(NameKeyHash()(name), StringHash()(name)) << n;
    EXPECT_TRUE(NameKeyEq()(key, name)) << n;
    EXPECT_TRUE(NameKeyEq()(name, key)) << n;
  }
}

TEST(NameKey, NamesThatDifferOnlyPastALengthOrByteAreDifferent) {
  EXPECT_FALSE(NameKeyEq()(NameKey("t1"), std::string_view("t12")));
  EXPECT_FALSE(NameKeyEq()(NameKey("t12"), NameKey("t1")));
  EXPECT_FALSE(NameKeyEq()(NameKey("abcdefghijklmno"), std::string_view("abcdefghijklmnp")));
  EXPECT_FALSE(NameKeyEq()(NameKey("abcdefghijklmnop"), NameKey("abcdefghijklmnoq")));
  // A name holding a NUL byte is still its full length.
  const std::string with_nul("a\0b", 3);
  EXPECT_EQ(NameKey(with_nul).view(), with_nul);
  EXPECT_FALSE(NameKeyEq()(NameKey(with_nul), std::string_view("a")));
}

TEST(NameKey, MapFindsByNameAndKeepsShortNamesAfterTheTextIsGone) {
  absl::flat_hash_map<NameKey, int, NameKeyHash, NameKeyEq> map;
  {
    std::string scratch = "t816_L55";
    map.try_emplace(std::string_view(scratch), 1);
    scratch.assign("xxxxxxxx");  // the short key holds its own copy
  }
  const std::string long_name = "t_attention_wk_weight_L6578";
  map.try_emplace(std::string_view(long_name), 2);
  for (int i = 0; i < 1000; ++i) map.try_emplace(std::string_view("n" + std::to_string(i)), i);
  ASSERT_NE(map.find(std::string_view("t816_L55")), map.end());
  EXPECT_EQ(map.find(std::string_view("t816_L55"))->second, 1);
  EXPECT_EQ(map.find(std::string_view(long_name))->second, 2);
  EXPECT_EQ(map.find(std::string_view("n999"))->second, 999);
  EXPECT_EQ(map.find(std::string_view("t816_L5")), map.end());
}

}  // namespace
}  // namespace peakmem
