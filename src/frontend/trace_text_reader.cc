// The text reader's public functions (trace_text_reader.h): one pass, or
// chunks on parallel threads (text_chunks.h) for a big trace.
#include "peakmem/frontend/trace_text_reader.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <utility>

#include "text_chunks.h"
#include "text_reader.h"

namespace peakmem {

using text::ChunkRange;
using text::FindBody;
using text::PlanChunks;
using text::RangesFrom;
using text::ReadInChunks;
using text::TextReader;

namespace {

Trace ReadInOnePass(const std::shared_ptr<const SourceFile>& source,
                    const TextReadOptions& options) {
  TextReader reader(source);
  reader.KeepFusionSubSymbolsOnly(options.fusion_subsymbols_only);
  reader.SetRank(options.rank);
  reader.SetDTensorLayout(options.dtensor_layout);
  return reader.Read();
}

}  // namespace

ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source,
                          const TextReadOptions& options) {
  ParsedTrace parsed;
  int threads = options.threads;
  std::size_t min_chunk_bytes = options.min_chunk_bytes;
  if (threads <= 0) {
    // Knobs for tests and tuning: PEAKMEM_READ_THREADS=4
    // PEAKMEM_READ_MIN_CHUNK_BYTES=1 splits even a tiny trace in four.
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("PEAKMEM_READ_THREADS")) threads = std::atoi(env);
    if (const char* env = std::getenv("PEAKMEM_READ_MIN_CHUNK_BYTES")) {
      min_chunk_bytes = static_cast<std::size_t>(std::strtoull(env, nullptr, 10));
    }
  }
  std::vector<ChunkRange> ranges;
  // Chunk readers read DTensor types for rank 0 (the default) without a
  // default layout; another rank, or a layout given, reads in one pass.
  if (threads > 1 && options.rank == 0 && options.dtensor_layout.empty())
    ranges = PlanChunks(source->text(), threads, min_chunk_bytes);
  if (ranges.size() > 1) {
    parsed.trace = ReadInChunks(source, std::move(ranges), &parsed.chunks_joined,
                                options.fusion_subsymbols_only);
  } else {
    parsed.trace = ReadInOnePass(source, options);
  }
  parsed.source = std::move(source);
  return parsed;
}

ParsedTrace ReadTraceText(std::string name, std::string text) {
  return ReadTraceText(std::make_shared<const SourceFile>(std::move(name), std::move(text)));
}

ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source) {
  return ReadTraceText(std::move(source), TextReadOptions{});
}

ParsedTrace ReadTraceTextInChunks(std::shared_ptr<const SourceFile> source,
                                  const std::vector<std::size_t>& begins,
                                  const TextReadOptions& options) {
  ParsedTrace parsed;
  std::size_t body_begin = 0;
  int indent = 0;
  std::vector<std::size_t> all{0};
  for (std::size_t b : begins) {
    if (b > all.back() && b < source->text().size()) all.push_back(b);
  }
  if (all.size() > 1 && FindBody(source->text(), &body_begin, &indent)) {
    parsed.trace = ReadInChunks(source, RangesFrom(all, source->text().size(), indent),
                                &parsed.chunks_joined, options.fusion_subsymbols_only);
  } else {
    parsed.trace = ReadInOnePass(source, options);
  }
  parsed.source = std::move(source);
  return parsed;
}

std::shared_ptr<const SourceFile> LoadSourceFile(const std::string& path) {
  return SourceFile::Map(path);
}

}  // namespace peakmem
