// The pickle emitter's bytes, derived by hand from the opcode table of
// CPython's Lib/pickle.py (protocol 2). tests/python/test_snapshot_writer.py
// loads whole snapshots with `pickle`.
#include "pickle_emitter.h"

#include <gtest/gtest.h>

#include <string>

namespace peakmem::writers {
namespace {

std::string Emit(void (*build)(PickleEmitter&)) {
  std::string out;
  const ReportSink sink = [&](std::string_view chunk) { out += chunk; };
  PickleEmitter p(sink);
  build(p);
  p.Finish();
  return out;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out += static_cast<char>(b);
  return out;
}

TEST(PickleEmitter, EmptyDict) {
  // PROTO 2 (80 02), EMPTY_DICT '}', MARK '(', SETITEMS 'u', STOP '.'.
  EXPECT_EQ(Emit([](PickleEmitter& p) {
              p.BeginDict();
              p.EndDict();
            }),
            Bytes({0x80, 0x02, '}', '(', 'u', '.'}));
}

TEST(PickleEmitter, IntsTakeTheShortestOpcode) {
  // [0, 255, 256, 65535, 65536, -1, 2^31 - 1, -2^31, 2^31, -2^31 - 1]:
  // BININT1 'K' for 0..255, BININT2 'M' (2 bytes LE) for 256..65535,
  // BININT 'J' (4 bytes LE two's complement) for the rest of int32, LONG1
  // 0x8a with 8 bytes LE two's complement beyond.
  const std::string expected =
      Bytes({0x80, 0x02, ']', '('}) + Bytes({'K', 0x00}) + Bytes({'K', 0xFF}) +
      Bytes({'M', 0x00, 0x01}) + Bytes({'M', 0xFF, 0xFF}) + Bytes({'J', 0x00, 0x00, 0x01, 0x00}) +
      Bytes({'J', 0xFF, 0xFF, 0xFF, 0xFF}) + Bytes({'J', 0xFF, 0xFF, 0xFF, 0x7F}) +
      Bytes({'J', 0x00, 0x00, 0x00, 0x80}) +
      Bytes({0x8a, 0x08, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00}) +
      Bytes({0x8a, 0x08, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF}) + Bytes({'e', '.'});
  EXPECT_EQ(Emit([](PickleEmitter& p) {
              p.BeginList();
              for (std::int64_t v : {std::int64_t{0}, std::int64_t{255}, std::int64_t{256},
                                     std::int64_t{65535}, std::int64_t{65536}, std::int64_t{-1},
                                     std::int64_t{2147483647}, std::int64_t{-2147483648LL},
                                     std::int64_t{2147483648LL}, std::int64_t{-2147483649LL}}) {
                p.Int(v);
              }
              p.EndList();
            }),
            expected);
}

TEST(PickleEmitter, NoneAndBools) {
  // NONE 'N', NEWTRUE 0x88, NEWFALSE 0x89.
  EXPECT_EQ(Emit([](PickleEmitter& p) {
              p.BeginList();
              p.None();
              p.Bool(true);
              p.Bool(false);
              p.EndList();
            }),
            Bytes({0x80, 0x02, ']', '(', 'N', 0x88, 0x89, 'e', '.'}));
}

TEST(PickleEmitter, StringsAreBinUnicodeAndMemoisedOnRequest) {
  // {'a': 'xy', 'b': 'a'} with 'a' memoised: BINUNICODE 'X' + 4-byte LE
  // length + bytes; the first Memo("a") is followed by BINPUT 'q' 0, the
  // second is BINGET 'h' 0.
  const std::string expected = Bytes({0x80, 0x02, '}', '('}) +
                               Bytes({'X', 1, 0, 0, 0, 'a', 'q', 0}) +
                               Bytes({'X', 2, 0, 0, 0, 'x', 'y'}) + Bytes({'X', 1, 0, 0, 0, 'b'}) +
                               Bytes({'h', 0}) + Bytes({'u', '.'});
  EXPECT_EQ(Emit([](PickleEmitter& p) {
              p.BeginDict();
              p.Memo("a");
              p.Str("xy");
              p.Str("b");
              p.Memo("a");
              p.EndDict();
            }),
            expected);
}

TEST(PickleEmitter, MemoIndexesPast255UseTheLongOpcodes) {
  // The 257th memoised string gets index 256: LONG_BINPUT 'r' 00 01 00 00,
  // and fetching it again LONG_BINGET 'j' 00 01 00 00.
  const std::string out = Emit([](PickleEmitter& p) {
    p.BeginList();
    for (int i = 0; i <= 256; ++i) p.Memo("s" + std::to_string(i));
    p.Memo("s256");
    p.EndList();
  });
  const std::string tail = Bytes({'X', 4, 0, 0, 0, 's', '2', '5', '6', 'r', 0, 1, 0, 0}) +
                           Bytes({'j', 0, 1, 0, 0, 'e', '.'});
  ASSERT_GE(out.size(), tail.size());
  EXPECT_EQ(out.substr(out.size() - tail.size()), tail);
}

TEST(PickleEmitter, InvalidUtf8BecomesReplacementCharacters) {
  // "a\xff" + "\xc3\xa9" (é, valid) + "\xe0\x80" (overlong, cut): the
  // invalid bytes each become U+FFFD (EF BF BD); é stays.
  EXPECT_EQ(ValidUtf8("a\xff\xc3\xa9\xe0\x80"),
            "a\xEF\xBF\xBD\xc3\xa9\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(ValidUtf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // U+1F600
  const std::string out = Emit([](PickleEmitter& p) { p.Str("\xff"); });
  EXPECT_EQ(out, Bytes({0x80, 0x02, 'X', 3, 0, 0, 0, 0xEF, 0xBF, 0xBD, '.'}));
}

}  // namespace
}  // namespace peakmem::writers
