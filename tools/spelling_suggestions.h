// `peakmem`'s "did you mean ...?" after a usage error: a mistyped
// subcommand (`peakmem analyse`, `peakmem stpe`) or long option (`--fromat`).
#pragma once

#include <CLI/CLI.hpp>

namespace peakmem_cli {

// Prints the suggestions (stderr) for argv's mistyped words, if any.
void SuggestSpelling(const CLI::App& app, int argc, char** argv);

}  // namespace peakmem_cli
