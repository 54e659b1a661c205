// Front ends: the readers that turn an input into a ParsedTrace, behind one
// interface, and the registry that picks the reader for an input.
//
// Each front end has a name, Sniff (does this input look like mine?) and
// Read. The built-in ones are "json" (peakmem's JSON export: the first
// non-blank character is '{'; trace_json_reader.h) and "text" (a printed
// Thunder trace: any other input; trace_text_reader.h), asked in that order.
// A front end registered with RegisterFrontend is asked before them.
// Every front end leaves the output types its input omits to the shared pass
// in type_inference.h.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/frontend/read_options.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/source.h"

namespace peakmem {

struct Frontend {
  std::string_view name;  // a string with static storage ("text")
  // Whether `text` looks like this front end's input. Looks at as little
  // of it as it can: it runs on the whole of a file of gigabytes.
  bool (*sniff)(std::string_view text) = nullptr;
  // Reads `source`; throws TraceError on bad input.
  ParsedTrace (*read)(std::shared_ptr<const SourceFile> source, const ReadOptions& options) =
      nullptr;
};

// The front ends in the order they are asked: those registered (the latest
// first), then the built-in ones.
std::vector<Frontend> Frontends();
// Adds a front end, asked before those already there. Both fields must be
// set; throws std::invalid_argument if one is not or the name is taken.
void RegisterFrontend(const Frontend& frontend);
// The front end named `name`, if there is one.
std::optional<Frontend> FindFrontend(std::string_view name);
// The first front end whose sniff accepts `text` ("text" accepts any).
Frontend FrontendFor(std::string_view text);

// Reads `source` with the front end for its text.
ParsedTrace ReadTrace(std::shared_ptr<const SourceFile> source, const ReadOptions& options = {});

// Reads a trace file with the front end its text asks for: printed trace
// text, or the JSON export (a file whose first non-blank character is '{').
// Throws TraceError on bad input. `text_options`: how printed traces are
// read (threads).
ParsedTrace LoadTrace(const std::string& path, const TextReadOptions& text_options = {});
// Same for text held in memory; `name` is used in messages.
ParsedTrace ParseTrace(const std::string& name, std::string text,
                       const TextReadOptions& text_options = {});

}  // namespace peakmem
