// Every op rule is an OpInfo field or a semantics/ function found through the
// registry (semantics/op_registry.h): code outside semantics/ asks the
// registry and never compares a call's name with an op's. This test reads
// the sources as text and fails on a string literal naming a registry op
// where it is compared: `== "linear"`, `"sum" !=`, a Python `in ("a", ...)`,
// `starts_with("...")`, or two or more op names in one braced list (a set of
// names). The statement symbols the IR owns (ir/trace.h IsStatementSymbol:
// python_del, clear_mutable_collection, ...) are syntax and not checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/ir/trace.h"
#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

namespace fs = std::filesystem;

// Compares that name an op but are no op rule: (file, literal) -> why.
const std::map<std::pair<std::string, std::string>, std::string> kAllowed = {
    {{"src/report/allocator_summary.cc", "all"},
     "the allocator's device \"all\" (memory_stats' all-devices figures), not torch.all"},
};

std::set<std::string, std::less<>> OpNames() {
  std::set<std::string, std::less<>> names;
  for (const OpInfo& op : AllOps()) {
    if (!IsStatementSymbol(op.name)) names.emplace(op.name);
  }
  return names;
}

// The line without its comment (`//` in C++, `#` in Python), found outside
// string literals.
std::string Code(const std::string& line, bool python) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '"' || (python && c == '\'')) {
      quote = c;
    } else if ((python && c == '#') || (!python && c == '/' && i + 1 < line.size() && line[i + 1] == '/')) {
      return line.substr(0, i);
    }
  }
  return line;
}

// The op names a line compares: each literal naming an op whose
// neighbourhood is a comparison, or all of them where one braced list
// holds two or more.
std::vector<std::string> ComparedOpNames(const std::string& code, bool python,
                                         const std::set<std::string, std::less<>>& ops) {
  static const std::regex kLiteral(R"re("([A-Za-z0-9_.]+)"|'([A-Za-z0-9_.]+)')re");
  static const std::regex kBefore(R"re((==|!=|starts_with\(|ends_with\(|compare\(|\bin\s*[(\[{][^)\]}]*)\s*$)re");
  static const std::regex kAfter(R"re(^\s*(==|!=))re");
  std::vector<std::string> compared, listed;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), kLiteral); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string name = m[1].matched ? m[1].str() : m[2].str();
    if (!m[1].matched && !python) continue;  // a C++ character literal
    if (!ops.contains(name)) continue;
    const std::string before = code.substr(0, m.position(0));
    const std::string after = code.substr(m.position(0) + m.length(0));
    if (std::regex_search(before, kBefore) || std::regex_search(after, kAfter)) {
      compared.push_back(name);
    } else if (!python && before.find('{') != std::string::npos) {
      listed.push_back(name);
    }
  }
  if (listed.size() >= 2) compared.insert(compared.end(), listed.begin(), listed.end());
  return compared;
}

bool Checked(const fs::path& relative) {
  const std::string p = relative.generic_string();
  const std::string name = relative.filename().string();
  if (p.find("/semantics/") != std::string::npos) return false;
  if (name.ends_with("_test.cc") || name.ends_with("_test_util.h")) return false;  // tests state rules
  return name.ends_with(".cc") || name.ends_with(".h") || name.ends_with(".py");
}

TEST(OpNameCompares, NoneOutsideSemantics) {
  const fs::path root = fs::path(PEAKMEM_TEST_DATA_DIR).parent_path().parent_path();
  const auto ops = OpNames();
  ASSERT_GT(ops.size(), 200u);
  std::vector<std::string> found;
  int files = 0;
  for (const char* dir : {"include/peakmem", "src", "tools", "python/src", "python/peakmem"}) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(root / dir)) {
      const fs::path relative = fs::relative(e.path(), root);
      if (!e.is_regular_file() || !Checked(relative)) continue;
      ++files;
      const bool python = relative.extension() == ".py";
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        for (const std::string& name : ComparedOpNames(Code(line, python), python, ops)) {
          if (kAllowed.contains({relative.generic_string(), name})) continue;
          found.push_back(relative.generic_string() + ":" + std::to_string(n) + ": compares the op name '" +
                          name + "': make it an OpInfo field or a semantics/ function");
        }
      }
    }
  }
  EXPECT_GT(files, 100);
  for (const std::string& f : found) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace peakmem
