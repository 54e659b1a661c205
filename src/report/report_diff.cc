#include "peakmem/report/report_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace peakmem {
namespace {

// Live bytes at point p: 0 is the arguments alone, i + 1 after statement i.
std::int64_t LiveAt(const Report& r, std::size_t point) {
  if (point == 0) return r.steps.empty() ? r.final_bytes : r.steps[0].live_bytes - r.steps[0].delta_bytes;
  return r.steps[point - 1].live_bytes;
}

DiffPoint PointOf(const Report& r, std::size_t point) {
  DiffPoint p;
  if (point > r.steps.size()) return p;
  p.exists = true;
  p.live_bytes = LiveAt(r, point);
  if (point == 0) {
    p.op = "(arguments)";
    return p;
  }
  const Step& s = r.steps[point - 1];
  p.line = s.line;
  p.op = std::string(s.op);
  p.source = std::string(s.source);
  return p;
}

// The groups of both sides by key, differing ones only, largest |delta|
// first (then by key).
template <typename Key>
std::vector<DiffGroup> Compare(const Attribution& a, const Attribution& b, Key key) {
  std::map<std::string, DiffGroup> groups;
  for (const AttributedStorage& s : a.largest) {
    DiffGroup& g = groups[key(s)];
    g.a_bytes += s.bytes;
  }
  for (const AttributedStorage& s : b.largest) {
    DiffGroup& g = groups[key(s)];
    g.b_bytes += s.bytes;
  }
  std::vector<DiffGroup> out;
  for (auto& [k, g] : groups) {
    if (g.delta() == 0) continue;
    g.key = k;
    out.push_back(g);
  }
  std::sort(out.begin(), out.end(), [](const DiffGroup& x, const DiffGroup& y) {
    const std::int64_t dx = x.delta() < 0 ? -x.delta() : x.delta();
    const std::int64_t dy = y.delta() < 0 ? -y.delta() : y.delta();
    return dx != dy ? dx > dy : x.key < y.key;
  });
  return out;
}

void Require(const Report& r, const char* side) {
  if (r.alloc_log == nullptr) {
    throw std::invalid_argument(std::string("report ") + side +
                                " has no allocation event log (run it with ReportOptions::alloc_log)");
  }
  if (r.steps.size() != static_cast<std::size_t>(r.alloc_log->steps)) {
    throw std::invalid_argument(std::string("report ") + side +
                                " has no steps (run it with ReportOptions::steps)");
  }
}

}  // namespace

ReportDiff DiffReports(const Report& a, const Report& b) {
  Require(a, "A");
  Require(b, "B");
  ReportDiff d;
  d.a_peak = a.peak_bytes;
  d.b_peak = b.peak_bytes;
  d.a_final = a.final_bytes;
  d.b_final = b.final_bytes;
  d.a_peak_step = a.peak_step;
  d.b_peak_step = b.peak_step;
  d.a_steps = a.steps.size();
  d.b_steps = b.steps.size();
  const std::size_t common = std::min(a.steps.size(), b.steps.size());
  for (std::size_t p = 0; p <= common; ++p) {
    if (LiveAt(a, p) != LiveAt(b, p)) {
      d.first_divergence = static_cast<std::int64_t>(p);
      break;
    }
  }
  if (d.first_divergence < 0 && a.steps.size() != b.steps.size()) {
    d.first_divergence = static_cast<std::int64_t>(common + 1);
  }
  if (d.first_divergence >= 0) {
    d.a_at = PointOf(a, static_cast<std::size_t>(d.first_divergence));
    d.b_at = PointOf(b, static_cast<std::size_t>(d.first_divergence));
  }
  const Attribution at_a = AttributeAtPeak(a, 0), at_b = AttributeAtPeak(b, 0);
  d.by_category = Compare(at_a, at_b, [](const AttributedStorage& s) { return std::string(s.category); });
  d.by_op = Compare(at_a, at_b, [](const AttributedStorage& s) { return std::string(s.made_by); });
  d.by_storage = Compare(at_a, at_b, [](const AttributedStorage& s) {
    // Scratch has no name: each op's scratch is one group.
    return s.category == "scratch" ? "(scratch of " + std::string(s.made_by) + ")" : std::string(s.name);
  });
  return d;
}

namespace {

std::string Signed(std::int64_t v) { return v > 0 ? fmt::format("+{}", v) : fmt::format("{}", v); }

void AppendGroupsText(const char* title, const std::vector<DiffGroup>& groups, std::size_t limit,
                      std::string* out) {
  if (groups.empty()) return;
  *out += fmt::format("\n{}:\n  {:>14} {:>14} {:>14}  {}\n", title, "A", "B", "B - A", "");
  for (std::size_t i = 0; i < std::min(groups.size(), limit); ++i) {
    const DiffGroup& g = groups[i];
    *out += fmt::format("  {:>14} {:>14} {:>14}  {}\n", g.a_bytes, g.b_bytes, Signed(g.delta()), g.key);
  }
  if (groups.size() > limit) *out += fmt::format("  ... and {} more\n", groups.size() - limit);
}

std::string PointText(const DiffPoint& p) {
  if (!p.exists) return "(the trace has ended)";
  if (p.line == 0 && p.source.empty()) return fmt::format("{} live, {}", p.live_bytes, p.op);
  return fmt::format("{} live after line {}: {}", p.live_bytes, p.line, p.source);
}

nlohmann::ordered_json GroupsJson(const std::vector<DiffGroup>& groups) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const DiffGroup& g : groups) {
    out.push_back({{"key", g.key}, {"a_bytes", g.a_bytes}, {"b_bytes", g.b_bytes}, {"delta_bytes", g.delta()}});
  }
  return out;
}

nlohmann::ordered_json PointJson(const DiffPoint& p) {
  if (!p.exists) return nullptr;
  return {{"line", p.line}, {"op", p.op}, {"source", p.source}, {"live_bytes", p.live_bytes}};
}

}  // namespace

std::string DiffToText(const ReportDiff& d, std::string_view a_name, std::string_view b_name) {
  std::string out = fmt::format("A: {}\nB: {}\n", a_name, b_name);
  out += fmt::format("peak:  A {} bytes, B {} bytes: B - A = {} bytes\n", d.a_peak, d.b_peak,
                     Signed(d.b_peak - d.a_peak));
  out += fmt::format("final: A {} bytes, B {} bytes: B - A = {} bytes\n", d.a_final, d.b_final,
                     Signed(d.b_final - d.a_final));
  out += fmt::format("peak step: A {}, B {}; statements: A {}, B {}\n", d.a_peak_step, d.b_peak_step,
                     d.a_steps, d.b_steps);
  if (d.first_divergence < 0) {
    out += "the live bytes never differ\n";
  } else {
    out += fmt::format("first divergence at {}:\n  A: {}\n  B: {}\n",
                       d.first_divergence == 0 ? std::string("the arguments")
                                               : fmt::format("step {}", d.first_divergence - 1),
                       PointText(d.a_at), PointText(d.b_at));
  }
  constexpr std::size_t kShown = 15;
  AppendGroupsText("at the peaks, by category", d.by_category, kShown, &out);
  AppendGroupsText("at the peaks, by the op that made them", d.by_op, kShown, &out);
  AppendGroupsText("at the peaks, by storage (matched by name)", d.by_storage, kShown, &out);
  return out;
}

std::string DiffToJson(const ReportDiff& d, std::string_view a_name, std::string_view b_name, int indent) {
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["a"] = {{"trace", a_name}, {"peak_bytes", d.a_peak}, {"final_bytes", d.a_final},
            {"peak_step", d.a_peak_step}, {"statements", d.a_steps}};
  j["b"] = {{"trace", b_name}, {"peak_bytes", d.b_peak}, {"final_bytes", d.b_final},
            {"peak_step", d.b_peak_step}, {"statements", d.b_steps}};
  j["peak_delta_bytes"] = d.b_peak - d.a_peak;
  j["final_delta_bytes"] = d.b_final - d.a_final;
  if (d.first_divergence < 0) {
    j["first_divergence"] = nullptr;
  } else {
    j["first_divergence"] = {{"point", d.first_divergence},
                             {"step", d.first_divergence - 1},
                             {"a", PointJson(d.a_at)},
                             {"b", PointJson(d.b_at)}};
  }
  j["by_category"] = GroupsJson(d.by_category);
  j["by_op"] = GroupsJson(d.by_op);
  j["by_storage"] = GroupsJson(d.by_storage);
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace peakmem
