#include "spelling_suggestions.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace peakmem_cli {
namespace {

// Two adjacent letters swapped count as one edit (`stpe` is one edit from
// `step`): the optimal string alignment distance.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The closest of `candidates` to `word` when it is a likely typo (at most
// two edits, and fewer than half its length); empty otherwise.
std::string Closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 3;
  for (const std::string& c : candidates) {
    const std::size_t d = EditDistance(word, c);
    if (d < best_distance && 2 * d < word.size()) best = c, best_distance = d;
  }
  return best;
}

// After a usage error: "did you mean ...?" for a mistyped subcommand or
// long option (`peakmem analyse`, `--fromat`).
}  // namespace

void SuggestSpelling(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  if (argc < 2) return;
  const std::string_view first = argv[1];
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == first) command = sub;
  }
  if (command == nullptr) {
    if (first.empty() || first[0] == '-') return;
    const std::string guess = Closest(first, commands);
    if (!guess.empty()) std::fprintf(stderr, "peakmem: did you mean '%s'?\n", guess.c_str());
    return;
  }
  std::vector<std::string> options;
  for (const CLI::Option* o : command->get_options()) {
    for (const std::string& name : o->get_lnames()) options.push_back("--" + name);
  }
  for (int i = 2; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.size() < 3 || arg.substr(0, 2) != "--") continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(options.begin(), options.end(), arg) != options.end()) continue;
    const std::string guess = Closest(arg, options);
    if (!guess.empty()) {
      std::fprintf(stderr, "peakmem: %.*s: did you mean '%s'?\n", static_cast<int>(arg.size()), arg.data(),
                   guess.c_str());
    }
  }
}


}  // namespace peakmem_cli
