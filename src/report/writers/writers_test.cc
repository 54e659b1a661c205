// The registry, and the chrome-trace and annotated writers on the hand-built
// report of writer_test_util.h (its live bytes are derived there).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "peakmem/report/writer.h"
#include "writer_test_util.h"

namespace peakmem::writers {
namespace {

using testing::HandBuiltReport;

TEST(WriterRegistry, ListsEveryFormatOnceTextFirst) {
  EXPECT_EQ(WriterNames(),
            (std::vector<std::string>{"text", "json", "annotated", "chrome-trace", "snapshot"}));
  for (const ReportWriter* w : AllWriters()) {
    EXPECT_EQ(FindWriter(w->name()), w);
    EXPECT_FALSE(w->description().empty()) << w->name();
  }
  EXPECT_EQ(FindWriter("xml"), nullptr);
}

TEST(WriterRegistry, ReportOptionsForAWriter) {
  // The text report shows kTextReportLiveTensors storages; JSON all of them.
  EXPECT_EQ(ReportOptionsFor(*FindWriter("text")).live_at_peak_limit, kTextReportLiveTensors);
  EXPECT_EQ(ReportOptionsFor(*FindWriter("json")).live_at_peak_limit, 0u);
  EXPECT_FALSE(ReportOptionsFor(*FindWriter("json")).alloc_log);
  // chrome-trace shows the live bytes by role when the log is kept.
  EXPECT_FALSE(FindWriter("chrome-trace")->needs_alloc_log());
  EXPECT_TRUE(ReportOptionsFor(*FindWriter("chrome-trace")).alloc_log);
  ReportOptions base;
  base.live_at_peak_limit = 3;
  base.steps = false;
  const ReportOptions text = ReportOptionsFor(*FindWriter("text"), base);
  EXPECT_EQ(text.live_at_peak_limit, 3u);  // fewer than shown: kept
  EXPECT_FALSE(text.steps);
}

TEST(WriterRegistry, TextAndJsonWritersAreTheRenderings) {
  const Report r = HandBuiltReport(true);
  EXPECT_EQ(WriteToString(*FindWriter("text"), r), ReportToText(r));
  EXPECT_EQ(WriteToString(*FindWriter("json"), r), ReportToJson(r, 2));
  WriterOptions compact;
  compact.indent = -1;
  EXPECT_EQ(WriteToString(*FindWriter("json"), r, compact), ReportToJson(r, -1));
}

nlohmann::json ChromeTrace(const Report& r) {
  return nlohmann::json::parse(WriteToString(*FindWriter("chrome-trace"), r));
}

TEST(ChromeTraceWriter, SlicePerStatementAndLiveBytesCounter) {
  const nlohmann::json j = ChromeTrace(HandBuiltReport(false));
  std::vector<std::string> slices;
  std::map<std::int64_t, std::int64_t> live;  // ts -> bytes
  for (const nlohmann::json& e : j.at("traceEvents")) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e;
    const std::string ph = e.at("ph");
    if (ph == "X") {
      const auto ts = e.at("ts").get<std::int64_t>();
      EXPECT_EQ(ts, static_cast<std::int64_t>(slices.size()));
      EXPECT_EQ(e.at("dur").get<std::int64_t>(), 1);
      EXPECT_EQ(e.at("tid").get<int>(), 1);
      slices.push_back(e.at("name"));
    } else if (ph == "C") {
      EXPECT_NE(e.at("name"), "live bytes by role");  // no log
      live[e.at("ts").get<std::int64_t>()] = e.at("args").at("bytes").get<std::int64_t>();
    } else {
      EXPECT_EQ(ph, "M");
    }
  }
  EXPECT_EQ(slices, (std::vector<std::string>{"mul", "python_del", "neg"}));
  // Before the first statement 1016; after each: 2040, 1016, 1616.
  EXPECT_EQ(live, (std::map<std::int64_t, std::int64_t>{{0, 1016}, {1, 2040}, {2, 1016}, {3, 1616}}));
  EXPECT_EQ(j.at("otherData").at("peak_bytes").get<std::int64_t>(), 2044);
}

TEST(ChromeTraceWriter, StatementSliceArgs) {
  const nlohmann::json j = ChromeTrace(HandBuiltReport(false));
  for (const nlohmann::json& e : j.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("name") != "mul") continue;
    EXPECT_EQ(e.at("args").at("line").get<int>(), 5);
    EXPECT_EQ(e.at("args").at("source"), "t0 = torch.mul(a, a)");
    EXPECT_EQ(e.at("args").at("live_bytes").get<std::int64_t>(), 2040);
    EXPECT_EQ(e.at("args").at("peak_bytes").get<std::int64_t>(), 2044);
    return;
  }
  FAIL() << "no slice for mul";
}

TEST(ChromeTraceWriter, RoleCounterFromTheLog) {
  const nlohmann::json j = ChromeTrace(HandBuiltReport(true));
  std::map<std::int64_t, std::map<std::string, std::int64_t>> roles;
  for (const nlohmann::json& e : j.at("traceEvents")) {
    if (e.at("name") != "live bytes by role") continue;
    EXPECT_EQ(e.at("ph"), "C");
    for (const auto& [role, bytes] : e.at("args").items()) {
      roles[e.at("ts").get<std::int64_t>()][role] = bytes.get<std::int64_t>();
    }
  }
  // a (argument) 16 and b (saved) 1000 throughout; intermediates: t0 1024
  // after step 0 (the scratch is freed inside it), none after step 1, t1 600
  // after step 2.
  using Roles = std::map<std::string, std::int64_t>;
  auto at = [](std::int64_t intermediate) {
    return Roles{{"argument", 16}, {"saved", 1000}, {"intermediate", intermediate}, {"scratch", 0}};
  };
  EXPECT_EQ(roles, (std::map<std::int64_t, Roles>{{0, at(0)}, {1, at(1024)}, {2, at(0)}, {3, at(600)}}));
}

TEST(AnnotatedWriter, EachStatementWithTheBytesLiveAfterIt) {
  EXPECT_EQ(WriteToString(*FindWriter("annotated"), HandBuiltReport(false)),
            "# trace: hand.trace\n"
            "# model: runtime; peak: 2044 bytes at step 0; final: 1616 bytes\n"
            "# live before the first statement (the arguments): 1016 bytes\n"
            "t0 = torch.mul(a, a)  # live: 2040 bytes (peak)\n"
            "del t0  # live: 1016 bytes\n"
            "t1 = torch.neg(b)  # live: 1616 bytes\n");
}

}  // namespace
}  // namespace peakmem::writers
