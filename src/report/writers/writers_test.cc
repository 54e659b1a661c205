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
            (std::vector<std::string>{"text", "json", "annotated", "chrome-trace", "snapshot", "html"}));
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

namespace peakmem::writers {
namespace {

// The hover data the html writer embeds (see html_writer.cc).
nlohmann::json HtmlData(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"peakmem-data\">";
  const std::size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const std::size_t end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

TEST(HtmlWriter, TimelineColumnsPeakMarkerAndHoverData) {
  const std::string html = WriteToString(*FindWriter("html"), HandBuiltReport(true));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Nothing fetched from elsewhere.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_NE(html.find("id=\"peak-marker\" data-step=\"0\" data-bytes=\"2044\""), std::string::npos);
  // One area per category that holds bytes at some point: argument, saved,
  // intermediate (scratch is freed inside its statement, so no column shows it).
  for (const char* c : {"argument", "saved", "intermediate"}) {
    EXPECT_NE(html.find(std::string("data-category=\"") + c + "\""), std::string::npos) << c;
  }
  EXPECT_EQ(html.find("data-category=\"scratch\""), std::string::npos);
  const nlohmann::json d = HtmlData(html);
  // Four points (the arguments and three statements), a column each:
  // [point, live, peak in step, argument, cotangent, saved, output,
  // intermediate, collective, scratch, largest storages].
  ASSERT_EQ(d["columns"].size(), 4u);
  EXPECT_EQ(d["columns"][0][1], 1016);
  EXPECT_EQ(d["columns"][1][1], 2040);
  EXPECT_EQ(d["columns"][1][2], 2044);
  EXPECT_EQ(d["columns"][1][7], 1024);  // t0, intermediate
  EXPECT_EQ(d["columns"][3][1], 1616);
  const nlohmann::json& largest = d["columns"][1][10];
  ASSERT_EQ(largest.size(), 3u);  // t0, b, a
  EXPECT_EQ(d["storages"][largest[0].get<int>()][0], "t0");
  EXPECT_EQ(d["steps"]["1"][0], "mul");
  EXPECT_EQ(d["peak_point"], 1);
  // At the peak: the tables.
  EXPECT_NE(html.find("Alive at the peak: 2.0 KiB (2044 bytes) in 4 storages"), std::string::npos);
}

TEST(HtmlWriter, SourceTextCannotEndTheScriptOrInjectMarkup) {
  Report r = HandBuiltReport(true);
  r.steps[0].source = "t0 = f('</script><b>x</b>')";
  const std::string html = WriteToString(*FindWriter("html"), r);
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_EQ(HtmlData(html)["steps"]["1"][2], "t0 = f('</script><b>x</b>')");
  EXPECT_THROW(WriteToString(*FindWriter("html"), HandBuiltReport(false)), std::invalid_argument);
}

TEST(HtmlWriter, LongTracesAreDrawnInAThousandColumnsKeepingThePeak) {
  // 5,000 statements each allocating and freeing nothing but one in the
  // middle (step 2,345) that allocates 100 bytes: the peak column shows it.
  Report r;
  r.model = "runtime";
  r.trace_name = "long";
  r.peak_bytes = 100;
  r.final_bytes = 100;
  r.peak_step = 2345;
  auto log = std::make_shared<AllocLog>();
  log->steps = 5000;
  log->devices = {"cpu"};
  StorageRecord s;
  s.bytes = 100;
  s.made_at = 2345;
  log->storages = {s};
  log->storage_names = {"big"};
  log->events = {{2345, 0, 100, true}};
  r.alloc_log = log;
  const nlohmann::json d = HtmlData(WriteToString(*FindWriter("html"), r));
  ASSERT_EQ(d["columns"].size(), 1000u);
  // Point 2346 (after step 2345) of 5001 points is in column 2346 * 1000 / 5001 = 469.
  EXPECT_EQ(d["columns"][469][0], 2346);
  EXPECT_EQ(d["columns"][469][1], 100);
  EXPECT_EQ(d["columns"][468][1], 0);
}

}  // namespace
}  // namespace peakmem::writers
