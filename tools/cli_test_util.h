// What the `peakmem` command's tests share: running the command as a
// separate process through popen, files under the GoogleTest temporary
// directory, and a check that an input file was left alone.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace peakmem::cli_test {

inline const std::string kCli = PEAKMEM_CLI_PATH;
inline const std::string kReferenceTrace = PEAKMEM_TEST_DATA_DIR "/nvfusion_broadcast_fw.trace";

inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A fresh path under the test temporary directory.
inline std::string TempPath(const std::string& name) {
  static int counter = 0;
  return ::testing::TempDir() + "peakmem_cli_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++) + "_" + name;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the CLI with already quoted `args`; stdout through the pipe, stderr
// through a temporary file.
inline CliResult RunCli(const std::string& args) {
  CliResult result;
  const std::string err_path = TempPath("stderr.txt");
  const std::string command = ShellQuote(kCli) + " " + args + " 2>" + ShellQuote(err_path);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return result;
  }
  char buffer[4096];
  std::size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFile(err_path);
  std::remove(err_path.c_str());
  return result;
}

// Runs the CLI with already quoted `args` and expects it to exit with
// `exit_code` and an error that contains `fragment`.
inline void ExpectFailure(const std::string& args, int exit_code, const std::string& fragment) {
  const CliResult r = RunCli(args);
  EXPECT_EQ(r.exit_code, exit_code) << args;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << args << ": " << r.err;
}

// Content and modification time, to check a file was left alone.
struct FileState {
  std::string content;
  struct timespec mtime {};
  bool operator==(const FileState& o) const {
    return content == o.content && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

inline FileState StateOf(const std::string& path) {
  FileState state;
  state.content = ReadFile(path);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) state.mtime = st.st_mtim;
  return state;
}

using Breakdown = std::vector<std::pair<std::string, std::int64_t>>;

inline Breakdown BreakdownOf(const nlohmann::ordered_json& report) {
  Breakdown items;
  for (const auto& [key, value] : report.at("breakdown").items()) {
    items.emplace_back(key, value.get<std::int64_t>());
  }
  return items;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(kCli.empty()) << "the peakmem CLI was not built"; }
};

}  // namespace peakmem::cli_test
