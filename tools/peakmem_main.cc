// The `peakmem` command: a thin shell over the library (peakmem/analyze.h).
//
//   peakmem analyze TRACE [--model thunder] [--format text|json] [--output FILE]
//
// Exit codes: 0 success, 1 bad input (trace error), 2 bad usage.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "peakmem/analyze.h"

namespace {

enum ExitCode : int { kExitOk = 0, kExitBadInput = 1, kExitUsage = 2 };

struct AnalyzeArgs {
  std::string trace;
  std::string model = "thunder";
  std::string format = "text";
  std::string output;
};

int RunAnalyze(const AnalyzeArgs& args) {
  try {
    const peakmem::ParsedTrace parsed = peakmem::LoadTrace(args.trace);
    const peakmem::Report report = peakmem::Analyze(parsed, args.model);
    const std::string rendered =
        args.format == "json" ? peakmem::ReportToJson(report) : peakmem::ReportToText(report);
    if (args.output.empty()) {
      std::cout << rendered;
    } else {
      std::ofstream out(args.output, std::ios::binary);
      out << rendered;
      if (!out) {
        std::cerr << "peakmem: error: cannot write " << args.output << "\n";
        return kExitBadInput;
      }
    }
    return kExitOk;
  } catch (const peakmem::TraceError& e) {
    std::cerr << "peakmem: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "peakmem: error: " << e.what() << "\n";
    return kExitUsage;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "peakmem: predicts the memory a tensor program (a Lightning Thunder execution trace)\n"
      "will use: the peak, what is held when it returns, and the live bytes after every op."};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 success; 1 bad input (the message gives file:line:col, the line and a "
      "caret); 2 bad usage.");

  AnalyzeArgs args;
  CLI::App* analyze = app.add_subcommand(
      "analyze", "Analyse a trace file (printed Thunder trace text, or peakmem's JSON export).");
  analyze->add_option("trace", args.trace, "Path of the trace file")->required();
  analyze
      ->add_option("-m,--model", args.model,
                   "Model: 'thunder' reproduces thunder.examine.memory_calculation."
                   "get_alloc_memory exactly (keys and quirks included)")
      ->capture_default_str();
  analyze
      ->add_option("-f,--format", args.format,
                   "Output format: 'text' (summary, breakdown, per-step table) or 'json' (object "
                   "with model, trace, peak_bytes, final_bytes, peak_step, breakdown, steps, "
                   "diagnostics)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  analyze->add_option("-o,--output", args.output, "Write the report to this file, not stdout");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (analyze->parsed()) return RunAnalyze(args);
  return kExitUsage;
}
