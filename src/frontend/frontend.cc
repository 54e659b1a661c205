#include "peakmem/frontend/frontend.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "peakmem/frontend/trace_json_reader.h"
#include "peakmem/frontend/trace_text_reader.h"

namespace peakmem {
namespace {

ParsedTrace ReadJson(std::shared_ptr<const SourceFile> source, const ReadOptions& options) {
  return ReadTraceJson(std::move(source), options.text.rank, options.text.dtensor_layout);
}

bool AnyText(std::string_view) { return true; }

ParsedTrace ReadText(std::shared_ptr<const SourceFile> source, const ReadOptions& options) {
  return ReadTraceText(std::move(source), options.text);
}

// Asked last, in this order: "text" takes whatever JSON does not.
constexpr std::array<Frontend, 2> kBuiltIn = {{
    {"json", &LooksLikeJson, &ReadJson},
    {"text", &AnyText, &ReadText},
}};

// Front ends registered at run time, in the order they were; guarded by
// the mutex (a registration may race a read on another thread).
struct Registry {
  std::mutex mutex;
  std::vector<Frontend> added;
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

// Calls `visit` on each front end in the order they are asked until it
// returns true; the registry is locked meanwhile.
template <typename F>
void ForEachFrontend(F&& visit) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (auto it = registry.added.rbegin(); it != registry.added.rend(); ++it) {
    if (visit(*it)) return;
  }
  for (const Frontend& f : kBuiltIn) {
    if (visit(f)) return;
  }
}

}  // namespace

std::vector<Frontend> Frontends() {
  std::vector<Frontend> all;
  ForEachFrontend([&](const Frontend& f) {
    all.push_back(f);
    return false;
  });
  return all;
}

void RegisterFrontend(const Frontend& frontend) {
  if (frontend.name.empty() || frontend.sniff == nullptr || frontend.read == nullptr) {
    throw std::invalid_argument("a front end needs a name, a sniff and a read function");
  }
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto named = [&](const Frontend& f) { return f.name == frontend.name; };
  if (std::any_of(registry.added.begin(), registry.added.end(), named) ||
      std::any_of(kBuiltIn.begin(), kBuiltIn.end(), named)) {
    throw std::invalid_argument("a front end named '" + std::string(frontend.name) +
                                "' is already registered");
  }
  registry.added.push_back(frontend);
}

std::optional<Frontend> FindFrontend(std::string_view name) {
  std::optional<Frontend> found;
  ForEachFrontend([&](const Frontend& f) {
    if (f.name == name) found = f;
    return found.has_value();
  });
  return found;
}

Frontend FrontendFor(std::string_view text) {
  Frontend chosen = kBuiltIn.back();
  ForEachFrontend([&](const Frontend& f) {
    if (!f.sniff(text)) return false;
    chosen = f;
    return true;
  });
  return chosen;
}

ParsedTrace ReadTrace(std::shared_ptr<const SourceFile> source, const ReadOptions& options) {
  const Frontend frontend = FrontendFor(source->text());
  ParsedTrace parsed = frontend.read(std::move(source), options);
  parsed.rank = options.text.rank;
  parsed.world_size = options.text.world_size;
  return parsed;
}

ParsedTrace ParseTrace(const std::string& name, std::string text,
                       const TextReadOptions& text_options) {
  return ReadTrace(std::make_shared<const SourceFile>(name, std::move(text)),
                   ReadOptions{text_options});
}

ParsedTrace LoadTrace(const std::string& path, const TextReadOptions& text_options) {
  return ReadTrace(SourceFile::Map(path), ReadOptions{text_options});
}

}  // namespace peakmem
