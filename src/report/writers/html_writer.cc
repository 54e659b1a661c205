// The "html" writer: one self-contained page (no network access needed to
// view it) with
//   - the summary: peak (and its statement), final bytes, the allocator's
//     numbers when one priced the run;
//   - a timeline of the live bytes after every statement, stacked by
//     category (attribution.h; a training step's own categories for a
//     step), the most bytes live inside each statement drawn as a line
//     above it, the peak marked (element id "peak-marker", colour
//     kPeakColour), and, for a program of several traces, where each phase
//     starts (class "phase": "forward 1", "backward 1", ...);
//   - hovering the plot shows the statement under the pointer: its op, its
//     source, the live bytes and the largest live storages; the page's
//     address may name a step to show on load ("report.html#step=23");
//   - what is alive at the peak, by category, by op and largest storages.
//
// The plot is inline SVG written here (it draws without JavaScript); the
// hover data is JSON in a <script type="application/json" id="peakmem-data">
// element: {"columns": [[point, live, peak_in_step, by category...,
// largest storage indexes...]...], "storages": [[name, bytes, category]...],
// "steps": {point: [op, line, source]}}. A point is 0 for the arguments and
// i + 1 after statement i. A trace with more statements than kMaxColumns is
// drawn in kMaxColumns columns, each showing its statement with the most
// live bytes (the peak's column shows the peak's statement).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/report/attribution.h"
#include "registry.h"

namespace peakmem::writers {
namespace {

constexpr std::size_t kMaxColumns = 1000;
constexpr std::size_t kHoverStorages = 5;  // largest live storages shown on hover
constexpr std::size_t kTableRows = 12;
constexpr std::array<const char*, kCategoryCount> kCategoryColours = {
    "#4e79a7", "#76b7b2", "#f28e2b", "#59a14f", "#edc948", "#9c755f", "#b07aa1"};
// kStepCategories' colours (python/peakmem/step_timeline.py draws with the same).
constexpr std::array<const char*, std::size(kStepCategories)> kStepCategoryColours = {
    "#4e79a7", "#76b7b2", "#59a14f", "#b07aa1", "#f28e2b", "#edc948", "#9c755f"};
constexpr const char* kPhaseColour = "#222222";

// The report's categories with their colours.
struct CategoryStyle {
  std::span<const std::string_view> names;
  const char* const* colours;
};
CategoryStyle StyleOf(const Report& report) {
  const std::span<const std::string_view> names = CategoryNames(report);
  return {names, report.storage_categories.empty() ? kCategoryColours.data() : kStepCategoryColours.data()};
}
constexpr const char* kPeakColour = "#e0102f";
constexpr const char* kStepPeakColour = "#555555";

// The plot's frame, in SVG pixels.
constexpr double kWidth = 960, kHeight = 360, kLeft = 90, kRight = 20, kTop = 24, kBottom = 44;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

void AppendHtml(std::string_view text, std::string* out) {
  for (const char c : text) {
    switch (c) {
      case '&': *out += "&amp;"; break;
      case '<': *out += "&lt;"; break;
      case '>': *out += "&gt;"; break;
      case '"': *out += "&quot;"; break;
      default: *out += c;
    }
  }
}

// A column of the timeline: the point (0: arguments, i + 1: after
// statement i) with the most live bytes among the column's points.
struct Column {
  std::int64_t point = -1;
  std::int64_t live = -1;
  std::int64_t step_peak = 0;  // the most bytes live inside the column's statements
  std::array<std::int64_t, kCategoryCount> by_category{};
  std::vector<StorageId> largest;
};

// Replays the log, filling each column with its point of most live bytes.
class ColumnBuilder final : public AllocSink {
 public:
  ColumnBuilder(const Report& report, const std::vector<std::uint8_t>& categories,
                std::size_t points)
      : report_(report), categories_(categories), points_(points),
        columns_(std::min(points, kMaxColumns)) {}

  void Alloc(StorageId id, const StorageRecord& s, std::int32_t) override {
    live_[categories_[id]] += s.bytes;
    total_ += s.bytes;
    step_peak_ = std::max(step_peak_, total_);
    if (s.bytes > 0) by_size_.insert({-s.bytes, id});
  }
  void Free(StorageId id, const StorageRecord& s, std::int32_t) override {
    live_[categories_[id]] -= s.bytes;
    total_ -= s.bytes;
    by_size_.erase({-s.bytes, id});
  }
  void StepEnd(std::int32_t step) override {
    const std::size_t point = static_cast<std::size_t>(step + 1);
    Column& c = columns_[ColumnOf(point)];
    std::int64_t in_step = step_peak_;
    if (step >= 0 && static_cast<std::size_t>(step) < report_.steps.size()) {
      in_step = std::max(in_step, report_.steps[step].peak_bytes);
    }
    c.step_peak = std::max(c.step_peak, in_step);
    step_peak_ = total_;
    if (total_ <= c.live && static_cast<std::int64_t>(step) != report_.peak_step) return;
    if (c.point >= 0 && c.point == report_.peak_step + 1) return;  // the peak's column keeps the peak
    c.point = static_cast<std::int64_t>(point);
    c.live = total_;
    c.by_category = live_;
    c.largest.clear();
    for (auto it = by_size_.begin(); it != by_size_.end() && c.largest.size() < kHoverStorages; ++it) {
      c.largest.push_back(it->second);
    }
  }
  std::size_t ColumnOf(std::size_t point) const { return point * columns_.size() / points_; }
  std::vector<Column>& columns() { return columns_; }

 private:
  const Report& report_;
  const std::vector<std::uint8_t>& categories_;
  std::size_t points_;
  std::vector<Column> columns_;
  std::array<std::int64_t, kCategoryCount> live_{};
  std::int64_t total_ = 0, step_peak_ = 0;
  std::set<std::pair<std::int64_t, StorageId>> by_size_;  // live storages, largest first
};

// A round axis maximum above `top` and its tick spacing.
std::pair<double, double> AxisScale(std::int64_t top) {
  const double t = std::max<double>(static_cast<double>(top), 1.0);
  const double unit = std::pow(1024.0, std::floor(std::log(t) / std::log(1024.0)));
  const double scaled = t / unit;  // in [1, 1024)
  double step = 1;
  for (const double s : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0}) {
    step = s;
    if (scaled / s <= 6) break;
  }
  const double tick = step * unit;
  return {std::ceil(t / tick) * tick, tick};
}

std::string Num(double v) { return fmt::format("{:.1f}", v); }

double Y(std::int64_t bytes, double axis_max) {
  return kTop + kPlotHeight - static_cast<double>(bytes) / axis_max * kPlotHeight;
}

// The stacked areas (one path per category, bottom to top), the in-step
// peak line and the axes.
void AppendPlotBody(const std::vector<Column>& columns, const CategoryStyle& style, double axis_max,
                    double tick, std::size_t points, std::string* out) {
  const double width = kPlotWidth / static_cast<double>(columns.size());
  std::vector<std::int64_t> below(columns.size(), 0);
  for (std::size_t c = 0; c < style.names.size(); ++c) {
    std::string top, bottom;
    bool any = false;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const double x0 = kLeft + width * static_cast<double>(i), x1 = x0 + width;
      const std::int64_t under = below[i];
      const std::int64_t over = under + std::max<std::int64_t>(columns[i].by_category[c], 0);
      any = any || over > under;
      top += fmt::format("{}{},{} L{},{} ", i == 0 ? "M" : "L", Num(x0), Num(Y(over, axis_max)),
                         Num(x1), Num(Y(over, axis_max)));
      bottom = fmt::format("L{},{} L{},{} ", Num(x1), Num(Y(under, axis_max)), Num(x0),
                           Num(Y(under, axis_max))) + bottom;
      below[i] = over;
    }
    if (!any) continue;
    *out += fmt::format("<path class=\"area\" data-category=\"{}\" fill=\"{}\" d=\"{}{}Z\"/>\n",
                        style.names[c], style.colours[c], top, bottom);
  }
  std::string line;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const double x0 = kLeft + width * static_cast<double>(i);
    line += fmt::format("{}{},{} L{},{} ", i == 0 ? "M" : "L", Num(x0),
                        Num(Y(columns[i].step_peak, axis_max)), Num(x0 + width),
                        Num(Y(columns[i].step_peak, axis_max)));
  }
  *out += fmt::format("<path id=\"step-peak-line\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\" "
                      "stroke-dasharray=\"3,2\" d=\"{}\"/>\n", kStepPeakColour, line);
  // Axes, ticks and labels.
  *out += fmt::format("<g class=\"axes\" stroke=\"#222\" fill=\"none\"><path d=\"M{},{} V{} H{}\"/></g>\n",
                      kLeft, kTop, kTop + kPlotHeight, kLeft + kPlotWidth);
  for (double v = 0; v <= axis_max + tick / 2; v += tick) {
    const double y = Y(static_cast<std::int64_t>(v), axis_max);
    *out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{}</text>"
                        "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n",
                        kLeft - 6, Num(y + 4), HumanBytes(static_cast<std::int64_t>(v)), kLeft + 1,
                        kLeft + kPlotWidth, Num(y), Num(y));
  }
  for (int k = 0; k <= 5; ++k) {
    const auto point = static_cast<std::size_t>(static_cast<double>(points - 1) * k / 5);
    const double x = kLeft + kPlotWidth * (static_cast<double>(point) + 0.5) / static_cast<double>(points);
    *out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"tick\">{}</text>\n",
                        Num(x), kTop + kPlotHeight + 16,
                        point == 0 ? std::string("args") : std::to_string(point - 1));
  }
  *out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">statement</text>\n",
                      kLeft + kPlotWidth / 2, kHeight - 6);
}

// The peak's vertical line, dot and label.
void AppendPeakMarker(const Report& report, const std::vector<Column>& columns, std::size_t column,
                      double axis_max, std::string* out) {
  const double width = kPlotWidth / static_cast<double>(columns.size());
  const double x = kLeft + width * (static_cast<double>(column) + 0.5);
  const double y = Y(report.peak_bytes, axis_max);
  const std::string where =
      report.peak_step >= 0 ? fmt::format("step {}", report.peak_step) : std::string("the arguments");
  *out += fmt::format(
      "<g id=\"peak-marker\" data-step=\"{}\" data-bytes=\"{}\"><line x1=\"{}\" x2=\"{}\" y1=\"{}\" "
      "y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"/><circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/>"
      "<text x=\"{}\" y=\"{}\" fill=\"{}\" text-anchor=\"{}\" font-weight=\"bold\">peak {} at {}</text></g>\n",
      report.peak_step, report.peak_bytes, Num(x), Num(x), kTop, kTop + kPlotHeight, kPeakColour,
      Num(x), Num(y), kPeakColour, Num(x + (x > kWidth / 2 ? -8 : 8)), kTop - 8, kPeakColour,
      x > kWidth / 2 ? "end" : "start", HumanBytes(report.peak_bytes), where);
}

// A program of several traces (Report::phases): a line where each phase
// starts, labelled with its name and iteration ("backward 2").
void AppendPhases(const Report& report, const ColumnBuilder& builder, std::size_t columns, std::string* out) {
  const double width = kPlotWidth / static_cast<double>(columns);
  for (std::size_t i = 0; i < report.phases.size(); ++i) {
    const ReportPhase& p = report.phases[i];
    const double x = kLeft + width * static_cast<double>(builder.ColumnOf(static_cast<std::size_t>(p.first) + 1));
    *out += fmt::format("<g class=\"phase\" data-phase=\"{}\" data-iteration=\"{}\"><line x1=\"{}\" x2=\"{}\" "
                        "y1=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"0.6\"/><text x=\"{}\" y=\"{}\" "
                        "font-size=\"9\">{} {}</text></g>\n",
                        p.name, p.iteration, Num(x), Num(x), kTop, kTop + kPlotHeight, kPhaseColour, Num(x + 2),
                        kTop + 10 + 10 * static_cast<double>(i % 2), p.name, p.iteration);
  }
}

// The hover data (see the file comment), with '<' escaped so that no text
// ends the <script> element.
std::string HoverData(const Report& report, const AllocLog& log, const CategoryStyle& style,
                      const std::vector<std::uint8_t>& categories, const std::vector<Column>& columns) {
  std::string json = "{\"columns\":[";
  std::map<StorageId, std::size_t> storage_index;
  std::vector<StorageId> storages;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const Column& c = columns[i];
    if (i) json += ',';
    json += fmt::format("[{},{},{}", c.point, c.live, c.step_peak);
    for (std::size_t k = 0; k < style.names.size(); ++k) json += fmt::format(",{}", c.by_category[k]);
    json += ",[";
    for (std::size_t k = 0; k < c.largest.size(); ++k) {
      const auto [it, added] = storage_index.emplace(c.largest[k], storages.size());
      if (added) storages.push_back(c.largest[k]);
      json += fmt::format("{}{}", k ? "," : "", it->second);
    }
    json += "]]";
  }
  json += "],\"categories\":[";
  for (std::size_t c = 0; c < style.names.size(); ++c) {
    json += fmt::format("{}[\"{}\",\"{}\"]", c ? "," : "", style.names[c], style.colours[c]);
  }
  json += "],\"storages\":[";
  for (std::size_t k = 0; k < storages.size(); ++k) {
    const StorageId id = storages[k];
    const StorageRecord& s = log.storages[id];
    json += k ? ",[" : "[";
    AppendJsonString(s.role == StorageRole::kScratch ? std::string_view("(scratch)")
                                                     : log.storage_names[id], &json);
    json += fmt::format(",{},\"{}\"]", s.bytes, style.names[categories[id]]);
  }
  json += "],\"steps\":{";
  bool first = true;
  for (const Column& c : columns) {
    if (c.point <= 0 || static_cast<std::size_t>(c.point - 1) >= report.steps.size()) continue;
    const Step& s = report.steps[static_cast<std::size_t>(c.point - 1)];
    json += fmt::format("{}\"{}\":[", first ? "" : ",", c.point);
    first = false;
    AppendJsonString(s.op, &json);
    json += fmt::format(",{},", s.line);
    AppendJsonString(s.source, &json);
    json += ']';
  }
  json += fmt::format("}},\"peak_point\":{},\"peak_bytes\":{}}}", report.peak_step + 1, report.peak_bytes);
  std::string safe;
  for (const char ch : json) {
    if (ch == '<') safe += "\\u003c"; else safe += ch;
  }
  return safe;
}

void AppendGroupTable(const char* title, const char* key, const std::vector<AttributionGroup>& groups,
                      std::string* out) {
  *out += fmt::format("<h3>{}</h3><table><tr><th>{}</th><th>bytes</th><th></th><th>storages</th></tr>\n",
                      title, key);
  for (std::size_t i = 0; i < std::min(groups.size(), kTableRows); ++i) {
    *out += "<tr><td>";
    AppendHtml(groups[i].key, out);
    *out += fmt::format("</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                        groups[i].bytes, HumanBytes(groups[i].bytes), groups[i].storages);
  }
  if (groups.size() > kTableRows) *out += fmt::format("<tr><td>... {} more</td></tr>", groups.size() - kTableRows);
  *out += "</table>\n";
}

void AppendAttribution(const Attribution& a, std::string* out) {
  *out += fmt::format("<h2>Alive at the peak: {} ({} bytes) in {} storages</h2>\n<div class=\"tables\">",
                      HumanBytes(a.live_bytes), a.live_bytes, a.storages);
  AppendGroupTable("By category", "category", a.by_category, out);
  AppendGroupTable("By the op that made them", "op", a.by_op, out);
  *out += "<h3>Largest storages</h3><table><tr><th>tensor</th><th>bytes</th><th></th><th>category</th>"
          "<th>made by</th><th>line</th></tr>\n";
  for (const AttributedStorage& s : a.largest) {
    *out += "<tr><td>";
    AppendHtml(s.name, out);
    *out += fmt::format("</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>", s.bytes,
                        HumanBytes(s.bytes), s.category);
    AppendHtml(s.made_by, out);
    *out += fmt::format("</td><td class=\"n\">{}</td></tr>\n", s.line > 0 ? std::to_string(s.line) : "");
  }
  *out += "</table></div>\n";
}

void AppendSummary(const Report& report, std::string* out) {
  *out += "<h1>peakmem: ";
  AppendHtml(report.trace_name, out);
  *out += fmt::format("</h1>\n<p class=\"summary\">model <b>{}</b>{} &middot; peak <b>{}</b> ({} bytes) "
                      "&middot; final <b>{}</b> ({} bytes)</p>\n",
                      report.model, report.convention.empty() ? "" : ", convention " + report.convention,
                      HumanBytes(report.peak_bytes), report.peak_bytes, HumanBytes(report.final_bytes),
                      report.final_bytes);
  if (report.peak_step >= 0 && static_cast<std::size_t>(report.peak_step) < report.steps.size()) {
    const Step& s = report.steps[static_cast<std::size_t>(report.peak_step)];
    *out += fmt::format("<p>The peak is reached in statement {} (line {}), op <code>", s.index, s.line);
    AppendHtml(s.op, out);
    *out += "</code>: <code>";
    AppendHtml(s.source, out);
    *out += "</code></p>\n";
  } else {
    *out += "<p>The peak is reached before the first statement (the arguments alone).</p>\n";
  }
  if (report.allocator != nullptr) {
    const CudaAllocatorStats& s = report.allocator->stats;
    *out += fmt::format("<p>Allocator {}: allocated peak <b>{}</b> ({} bytes), reserved peak <b>{}</b> "
                        "({} bytes), {} segments at most.</p>\n",
                        AllocatorModelName(report.allocator->model), HumanBytes(s.allocated_bytes_peak),
                        s.allocated_bytes_peak, HumanBytes(s.reserved_bytes_peak),
                        s.reserved_bytes_peak, s.segments_peak);
  }
  for (const std::string& d : report.diagnostics) {
    *out += "<p class=\"diagnostic\">";
    AppendHtml(d, out);
    *out += "</p>\n";
  }
}

constexpr const char* kStyle = R"(<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:20px} h2{font-size:17px;margin-top:28px} h3{font-size:15px}
code{font-family:monospace;font-size:13px} .tick{font-size:11px;fill:#444}
#plot{position:relative;width:960px} svg{display:block;shape-rendering:crispEdges}
svg text{shape-rendering:auto;font-size:12px}
#tooltip{position:absolute;display:none;pointer-events:none;background:#fffbe8;border:1px solid #888;
 padding:6px 8px;font-size:12px;max-width:520px;box-shadow:2px 2px 4px rgba(0,0,0,.2)}
#tooltip code{font-size:11px} .legend span{display:inline-block;margin-right:14px;font-size:13px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
table{border-collapse:collapse;margin:4px 0 12px} td,th{padding:2px 10px;text-align:left;font-size:13px}
td.n{text-align:right;font-variant-numeric:tabular-nums} tr:nth-child(even){background:#f4f4f4}
.diagnostic{color:#8a4b00}
</style>
)";

// Hover: the column under the pointer (or named by #step=N) shows its
// statement, its live bytes by category and its largest storages.
constexpr const char* kScript = R"(<script>
(function(){
const d=JSON.parse(document.getElementById('peakmem-data').textContent);
const svg=document.getElementById('timeline'),tip=document.getElementById('tooltip'),cur=document.getElementById('cursor');
const L=+svg.dataset.left,W=+svg.dataset.plotWidth,n=d.columns.length,P=+svg.dataset.points;
function human(b){const u=['B','KiB','MiB','GiB','TiB'];let i=0,v=Math.abs(b);while(v>=1024&&i<4){v/=1024;i++;}
 return (b<0?'-':'')+(i?v.toFixed(i>2?2:1):v)+' '+u[i];}
function esc(t){return String(t).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
function show(i){
 const c=d.columns[i];if(!c||c[0]<0)return;const p=c[0],s=d.steps[p];
 let h=p==0?'<b>arguments</b> (before the first statement)':'<b>statement '+(p-1)+'</b>'+(s?' (line '+s[1]+'), op <code>'+esc(s[0])+'</code><br><code>'+esc(s[2])+'</code>':'');
 h+='<br>live after it: <b>'+human(c[1])+'</b> ('+c[1]+' bytes)';
 if(p==d.peak_point)h+='<br><b style="color:#e0102f">peak: '+human(d.peak_bytes)+'</b>';
 h+='<br>'+d.categories.map((k,j)=>c[3+j]?'<span style="color:'+k[1]+'">&#9632;</span> '+k[0]+' '+human(c[3+j]):'').filter(x=>x).join(' &middot; ');
 const big=c[3+d.categories.length];if(big.length){h+='<br>largest live:<br>'+big.map(k=>{const t=d.storages[k];
  return '&nbsp; <code>'+esc(t[0])+'</code> '+human(t[1])+' ('+t[2]+')';}).join('<br>');}
 tip.innerHTML=h;tip.style.display='block';
 const x=L+W*(i+0.5)/n;cur.setAttribute('x1',x);cur.setAttribute('x2',x);cur.style.display='';
 tip.style.left=Math.min(x+12,960-530)+'px';tip.style.top='40px';tip.dataset.point=p;}
svg.addEventListener('mousemove',e=>{const r=svg.getBoundingClientRect();
 const i=Math.floor((e.clientX-r.left-L)/W*n);if(i>=0&&i<n)show(i);});
svg.addEventListener('mouseleave',()=>{tip.style.display='none';cur.style.display='none';});
const m=/step=(-?\d+)/.exec(location.hash);
if(m){const p=+m[1]+1;let i=Math.floor(p*n/P);show(Math.max(0,Math.min(n-1,i)));}
})();
</script>
)";

class Html final : public ReportWriter {
 public:
  std::string_view name() const override { return "html"; }
  std::string_view description() const override {
    return "self-contained HTML page: a timeline of live bytes stacked by category with the "
           "peak marked (hover a statement for its op and largest live tensors), and what is "
           "alive at the peak";
  }
  bool needs_alloc_log() const override { return true; }
  void Write(const Report& report, const WriterOptions&, const ReportSink& sink) const override {
    const AllocLog& log = RequireAllocLog(report, name());
    const std::vector<std::uint8_t> categories = StorageCategories(report);
    const CategoryStyle style = StyleOf(report);
    const std::size_t points = static_cast<std::size_t>(log.steps) + 1;
    ColumnBuilder builder(report, categories, points);
    Replay(log, builder);
    std::vector<Column>& columns = builder.columns();
    for (std::size_t i = 1; i < columns.size(); ++i) {  // (every column has a point: points >= columns)
      if (columns[i].point < 0) columns[i] = columns[i - 1];
    }
    std::int64_t top = report.peak_bytes;
    for (const Column& c : columns) top = std::max({top, c.live, c.step_peak});
    const auto [axis_max, tick] = AxisScale(top);

    std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>peakmem: ";
    AppendHtml(report.trace_name, &out);
    out += "</title>\n";
    out += kStyle;
    out += "</head><body>\n";
    AppendSummary(report, &out);
    out += "<div class=\"legend\">";
    for (std::size_t c = 0; c < style.names.size(); ++c) {
      out += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", style.colours[c], style.names[c]);
    }
    out += fmt::format("<span><i style=\"background:{}\"></i>most live inside a statement</span>"
                       "<span><i style=\"background:{}\"></i>peak</span></div>\n", kStepPeakColour, kPeakColour);
    out += fmt::format("<div id=\"plot\"><svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" "
                       "width=\"{}\" height=\"{}\" data-left=\"{}\" data-plot-width=\"{}\" data-points=\"{}\">\n",
                       kWidth, kHeight, kLeft, kPlotWidth, points);
    AppendPlotBody(columns, style, axis_max, tick, points, &out);
    AppendPhases(report, builder, columns.size(), &out);
    AppendPeakMarker(report, columns, builder.ColumnOf(static_cast<std::size_t>(report.peak_step + 1)),
                     axis_max, &out);
    out += fmt::format("<line id=\"cursor\" y1=\"{}\" y2=\"{}\" stroke=\"#000\" stroke-width=\"1\" "
                       "style=\"display:none\"/>\n</svg><div id=\"tooltip\"></div></div>\n",
                       kTop, kTop + kPlotHeight);
    AppendAttribution(AttributeAtPeak(report, kTableRows), &out);
    out += "<script type=\"application/json\" id=\"peakmem-data\">";
    out += HoverData(report, log, style, categories, columns);
    out += "</script>\n";
    out += kScript;
    out += "</body></html>\n";
    sink(out);
  }
};

}  // namespace

const ReportWriter& HtmlWriter() {
  static const Html writer;
  return writer;
}

}  // namespace peakmem::writers
