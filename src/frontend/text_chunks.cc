#include "text_chunks.h"

#include <algorithm>
#include <cstring>
#include <latch>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace peakmem::text {

bool FindBody(std::string_view text, std::size_t* body_begin, int* indent,
              std::size_t* def_begin) {
  LineCursor lines(text);
  std::string_view line;
  bool after_def = false;
  while (lines.begin() < (std::size_t{1} << 20) && lines.Next(&line)) {
    if (!after_def) {
      after_def = line.substr(0, 4) == "def ";
      if (after_def && def_begin != nullptr) *def_begin = lines.begin();
      continue;
    }
    const std::string_view t = Trim(line);
    if (t.empty() || (IndentOf(line) == 0 && t[0] == '#')) continue;
    *indent = IndentOf(line);
    *body_begin = lines.begin();
    return *indent > 0;
  }
  return false;
}

std::vector<ChunkRange> RangesFrom(const std::vector<std::size_t>& begins, std::size_t size,
                                   int indent) {
  std::vector<ChunkRange> ranges(begins.size());
  for (std::size_t k = 0; k < begins.size(); ++k) {
    ranges[k].begin = begins[k];
    ranges[k].end = k + 1 < begins.size() ? begins[k + 1] : size;
    ranges[k].body_indent = indent;
  }
  return ranges;
}

namespace {

// Whether a line of the body that ends the op call before it starts at
// `offset`: a statement or a comment at exactly the body's indentation. (A
// blank line or a deeper comment would still belong to that call.)
bool StartsBodyLine(std::string_view text, std::size_t offset, int indent) {
  if (offset >= text.size() || (offset > 0 && text[offset - 1] != '\n')) return false;
  const std::string_view rest = text.substr(offset, static_cast<std::size_t>(indent) + 1);
  return rest.size() == static_cast<std::size_t>(indent) + 1 && IndentOf(rest) == indent &&
         !IsSpace(rest.back()) && rest.back() != '\n';
}

// The start of the last line that is not empty.
std::size_t LastLineStart(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  const std::size_t nl = text.rfind('\n', end == 0 ? 0 : end - 1);
  return nl == std::string_view::npos || end == 0 ? 0 : nl + 1;
}

constexpr std::size_t kReturnCostPerByte = 7;

}  // namespace

std::vector<ChunkRange> PlanChunks(std::string_view text, int want, std::size_t min_bytes) {
  std::size_t body_begin = 0;
  int indent = 0;
  if (!FindBody(text, &body_begin, &indent)) return {};
  // The final `return` of a forward trace returns every tensor saved for
  // the backward: a line of megabytes that names hundreds of thousands of
  // values, most bound in earlier chunks. Reading it costs several times
  // what other lines cost per byte, so the last chunk is made shorter by
  // that much. The factor also carries what the last chunk costs the join
  // (every name the line takes from earlier chunks is checked there):
  // measured on the 10^6-statement llama trace, with 5 the last chunk's
  // reader finished ~45 ms after the first one (of ~600 ms), with 10 ~50 ms
  // before it; 7 balances them within the machine's noise (~+-25 ms).
  const std::size_t end = text.size();
  const std::size_t last_line = LastLineStart(text);
  std::size_t return_extra = 0;
  if (StartsBodyLine(text, last_line, indent) && last_line > body_begin &&
      text.compare(last_line + static_cast<std::size_t>(indent), 7, "return ") == 0) {
    return_extra = (end - last_line) * (kReturnCostPerByte - 1);
  }
  const std::size_t body_bytes = end - body_begin;
  const auto chunks =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(want, 1)),
                                             body_bytes / std::max<std::size_t>(min_bytes, 1)));
  if (chunks < 2) return {};
  std::vector<std::size_t> begins{0};
  const std::size_t share = (body_bytes + return_extra) / static_cast<std::size_t>(chunks);
  for (int k = 1; k < chunks; ++k) {
    std::size_t at = std::min(body_begin + share * static_cast<std::size_t>(k), last_line);
    // The first statement line at or after `at` (within 1 MB).
    const std::size_t limit = std::min(end, at + (std::size_t{1} << 20));
    while (at < limit) {
      if (at > 0 && text[at - 1] != '\n') {
        const auto* nl = static_cast<const char*>(std::memchr(text.data() + at, '\n', limit - at));
        if (nl == nullptr) break;
        at = static_cast<std::size_t>(nl - text.data()) + 1;
        continue;
      }
      const std::size_t ident = at + static_cast<std::size_t>(indent);
      if (ident < text.size() && IsIdentStart(text[ident]) &&
          IndentOf(text.substr(at, static_cast<std::size_t>(indent) + 1)) == indent) {
        if (at > begins.back()) begins.push_back(at);
        break;
      }
      ++at;  // look for the next line start
    }
  }
  if (begins.size() < 2) return {};
  return RangesFrom(begins, end, indent);
}

namespace {

// Frees `readers` on a detached thread (or here, when no thread can be
// started). They own nothing another thread uses: the source they view is
// shared and reference-counted.
void ReleaseInBackground(std::vector<std::unique_ptr<TextReader>> readers) {
  auto owned = std::make_unique<std::vector<std::unique_ptr<TextReader>>>(std::move(readers));
  try {
    std::thread([held = std::move(owned)]() mutable { held.reset(); }).detach();
  } catch (const std::system_error&) {
    // No thread: the lambda, and the readers with it, were freed here.
  }
}

// Reads chunk `range` (not the first) into *out; true when it can be
// appended: it ended exactly where the next chunk begins, at a line that
// ends the op call before it (or, for the `last` chunk, at the end of a
// well-formed trace). An error in the chunk leaves it false: the one-pass
// read from there gives the error, if it is one.
bool ReadChunk(const std::shared_ptr<const SourceFile>& source, const ChunkRange& range, bool last,
               const std::vector<std::string>& imports, bool fusion_subsymbols_only,
               std::unique_ptr<TextReader>* out) {
  const std::string_view text = source->text();
  if (!StartsBodyLine(text, range.begin, range.body_indent)) return false;
  try {
    *out = std::make_unique<TextReader>(source, range);
    TextReader& reader = **out;
    reader.KeepFusionSubSymbolsOnly(fusion_subsymbols_only);
    reader.SetImports(imports);
    reader.Reserve(range.newlines);
    reader.ReadLines();
    if (last) {
      reader.CheckEnd();
    } else if (reader.stopped_at() == range.end &&
               StartsBodyLine(text, range.end, range.body_indent)) {
      reader.FinishCall();  // as the next chunk's first line would
    } else {
      return false;  // a statement ran past the next chunk's start, or it starts no statement
    }
    return true;
  } catch (...) {
    return false;
  }
}

// Reads every chunk but the first on a thread of its own, and the first
// (preamble, signature and body up to the second chunk) with `first` on
// this one. Sets (*chunks)[k] to chunk k's reader and (*ok)[k] when it can
// be appended (see ReadChunk).
void ReadChunksInParallel(const std::shared_ptr<const SourceFile>& source,
                          std::vector<ChunkRange>& ranges, bool fusion_subsymbols_only,
                          TextReader& first, std::vector<std::unique_ptr<TextReader>>* chunks,
                          std::vector<char>* ok) {
  const std::string_view text = source->text();
  const std::size_t n = ranges.size();
  std::latch counted(static_cast<std::ptrdiff_t>(n));
  // Each thread counts its chunk's lines; once all have, each knows its
  // first line's number.
  auto count = [&](std::size_t k) {
    ranges[k].newlines =
        CountNewlines(text.substr(ranges[k].begin, ranges[k].end - ranges[k].begin));
    counted.arrive_and_wait();
    for (std::size_t j = 0; j < k; ++j)
      ranges[k].lines_before += static_cast<int>(ranges[j].newlines);
  };
  // The imports first: the chunks need them (for op symbols). They come
  // before the `def` line; the signature after it, which can be long (one
  // parameter per weight), is read by this thread while the chunks are.
  std::size_t body_begin = 0;
  std::size_t def_begin = 0;
  int indent = 0;
  if (FindBody(text, &body_begin, &indent, &def_begin) && body_begin <= ranges[1].begin) {
    first.StopAt(def_begin);
    first.ReadLines();
  }
  const std::vector<std::string> imports = first.imports();
  std::vector<std::jthread> threads;
  std::size_t started = 1;
  try {
    threads.reserve(n - 1);
    for (std::size_t k = 1; k < n; ++k, ++started) {
      threads.emplace_back([&, k] {
        count(k);
        (*ok)[k] = ReadChunk(source, ranges[k], k + 1 == n, imports, fusion_subsymbols_only,
                             &(*chunks)[k]);
      });
    }
  } catch (const std::system_error&) {
    // No more threads: the chunks not started are read in one pass.
    counted.count_down(static_cast<std::ptrdiff_t>(n - started));
  }
  count(0);
  std::size_t total = 0;
  for (const ChunkRange& r : ranges) total += r.newlines;
  // Every chunk's values and subsymbols are copied into this reader's trace;
  // the names of every chunk but the last into its name table.
  first.Reserve(total, total - ranges[n - 1].newlines);
  first.StopAt(ranges[1].begin);
  first.ReadLines();  // an error here is the error of one pass
}  // the threads join here

}  // namespace

Trace ReadInChunks(const std::shared_ptr<const SourceFile>& source, std::vector<ChunkRange> ranges,
                   int* joined, bool fusion_subsymbols_only) {
  const std::string_view text = source->text();
  const std::size_t n = ranges.size();
  TextReader first(source);
  first.KeepFusionSubSymbolsOnly(fusion_subsymbols_only);
  std::vector<std::unique_ptr<TextReader>> chunks(n);
  std::vector<char> ok(n, 0);
  ReadChunksInParallel(source, ranges, fusion_subsymbols_only, first, &chunks, &ok);

  // Append the chunks in order while each one fits.
  const TextReader* last = &first;
  bool appended_all = first.stopped_at() == ranges[1].begin && first.in_body() &&
                      first.body_indent() == ranges[1].body_indent && !first.returned() &&
                      StartsBodyLine(text, ranges[1].begin, ranges[1].body_indent);
  if (appended_all) first.FinishCall();  // as the second chunk's first line would
  for (std::size_t k = 1; k < n && appended_all; ++k) {
    appended_all = ok[k] && last->stopped_at() == ranges[k].begin && !last->returned() &&
                   first.Append(std::move(*chunks[k]), k + 1 < n);
    if (appended_all) {
      last = chunks[k].get();
      ++*joined;
    }
  }
  if (appended_all) {
    // The joined chunks' readers hold only what was moved out of them (and
    // their name tables): ~20 ms to free at 10^6 statements, done on a
    // thread of its own rather than before the trace can be analysed.
    ReleaseInBackground(std::move(chunks));
    return first.TakeTrace();
  }
  // The rest, from the first chunk not joined, in one pass.
  if (last != &first) first.ResumeAfter(*last);
  first.StopAt(std::string_view::npos);
  first.ReadLines();
  return first.Finish();
}

}  // namespace peakmem::text
