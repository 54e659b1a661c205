#include "peakmem/report.h"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

namespace peakmem {

void OrderedBreakdown::Set(std::string key, std::int64_t bytes) {
  auto [it, inserted] = index_.try_emplace(key, items_.size());
  if (!inserted) {
    items_[it->second].second = bytes;
    return;
  }
  items_.emplace_back(std::move(key), bytes);
}

std::string ReportToJson(const Report& report, int indent) {
  nlohmann::ordered_json j;
  j["model"] = report.model;
  j["trace"] = report.trace_name;
  j["peak_bytes"] = report.peak_bytes;
  j["final_bytes"] = report.final_bytes;
  j["peak_step"] = report.peak_step;
  if (report.tensor_peak_bytes >= 0) j["tensor_peak_bytes"] = report.tensor_peak_bytes;
  if (!report.convention.empty()) j["convention"] = report.convention;
  // The breakdown is spliced in as text below: ordered_json finds keys by
  // linear search, which is quadratic for a breakdown with a key per step.
  j["breakdown"] = nullptr;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const Step& s : report.steps) {
    steps.push_back({{"index", s.index},
                     {"line", s.line},
                     {"op", s.op},
                     {"source", s.source},
                     {"delta_bytes", s.delta_bytes},
                     {"live_bytes", s.live_bytes},
                     {"peak_bytes", s.peak_bytes}});
  }
  j["steps"] = std::move(steps);
  nlohmann::ordered_json live = nlohmann::ordered_json::array();
  for (const LiveTensor& t : report.live_at_peak) {
    live.push_back({{"name", t.name},
                    {"bytes", t.bytes},
                    {"made_by", t.made_by},
                    {"line", t.line},
                    {"role", t.role}});
  }
  j["live_at_peak"] = std::move(live);
  j["diagnostics"] = report.diagnostics;
  std::string out = j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string breakdown = "{";
  const std::string pad = indent >= 0 ? "\n" + std::string(2 * indent, ' ') : "";
  bool first = true;
  for (const auto& [key, bytes] : report.breakdown.items()) {
    breakdown += first ? "" : ",";
    first = false;
    breakdown += pad;
    breakdown += nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    breakdown += indent >= 0 ? ": " : ":";
    breakdown += std::to_string(bytes);
  }
  if (!first && indent >= 0) breakdown += "\n" + std::string(indent, ' ');
  breakdown += "}";
  const std::string placeholder = indent >= 0 ? "\"breakdown\": null" : "\"breakdown\":null";
  const std::size_t at = out.find(placeholder);
  out.replace(at + placeholder.size() - 4, 4, breakdown);
  return out + "\n";
}

namespace {

std::string HumanBytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes < 0 ? -bytes : bytes);
  const char* sign = bytes < 0 ? "-" : "";
  if (b < 1024) return fmt::format("{}{} B", sign, static_cast<std::int64_t>(b));
  if (b < 1024.0 * 1024) return fmt::format("{}{:.1f} KiB", sign, b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{}{:.1f} MiB", sign, b / (1024.0 * 1024));
  return fmt::format("{}{:.2f} GiB", sign, b / (1024.0 * 1024 * 1024));
}

}  // namespace

std::string ReportToText(const Report& report) {
  std::string out;
  out += fmt::format("trace: {}\nmodel: {}\n", report.trace_name, report.model);
  out += fmt::format("peak:  {} bytes ({})\n", report.peak_bytes, HumanBytes(report.peak_bytes));
  out += fmt::format("final: {} bytes ({})\n", report.final_bytes, HumanBytes(report.final_bytes));
  if (report.tensor_peak_bytes >= 0) {
    out += fmt::format("tensor peak (without op scratch): {} bytes ({})\n",
                       report.tensor_peak_bytes, HumanBytes(report.tensor_peak_bytes));
  }
  if (!report.convention.empty()) out += fmt::format("calling convention: {}\n", report.convention);
  if (report.peak_step >= 0 && report.peak_step < static_cast<int>(report.steps.size())) {
    const Step& s = report.steps[report.peak_step];
    out += fmt::format("peak reached at step {} (line {}), op '{}': {}\n", s.index, s.line, s.op,
                       s.source);
  } else {
    out += "peak reached before the first statement (the inputs alone)\n";
  }
  if (!report.live_at_peak.empty()) {
    out += "\nlargest live tensors at the peak:\n";
    const std::size_t shown = std::min<std::size_t>(report.live_at_peak.size(), 10);
    for (std::size_t i = 0; i < shown; ++i) {
      const LiveTensor& t = report.live_at_peak[i];
      out += fmt::format("  {:>14}  {:<12} {:<12} made by {}{}\n", t.bytes, t.name, t.role,
                         t.made_by, t.line > 0 ? fmt::format(" (line {})", t.line) : "");
    }
    if (report.live_at_peak.size() > shown) {
      out += fmt::format("  ... and {} more\n", report.live_at_peak.size() - shown);
    }
  }
  if (!report.diagnostics.empty()) {
    out += "\ndiagnostics:\n";
    for (const std::string& d : report.diagnostics) out += "  - " + d + "\n";
  }
  out += "\nbreakdown:\n";
  for (const auto& [key, bytes] : report.breakdown.items()) {
    out += fmt::format("  {:>14}  {}\n", bytes, key);
  }
  out += fmt::format("\n{:>5} {:>5} {:>14} {:>14} {:>14}  {}\n", "step", "line", "delta", "live",
                     "peak in step", "statement");
  for (const Step& s : report.steps) {
    std::string source = s.source;
    if (source.size() > 80) source = source.substr(0, 77) + "...";
    out += fmt::format("{:>5} {:>5} {:>14} {:>14} {:>14}  {}{}\n", s.index, s.line, s.delta_bytes,
                       s.live_bytes, s.peak_bytes, source,
                       s.index == report.peak_step ? "   <- peak" : "");
  }
  return out;
}

}  // namespace peakmem
