// The CUDA caching allocator model's speed (Google Benchmark): events per
// second replaying a large synthetic allocation log through
// CudaCachingAllocator, next to a baseline sink that only sums the bytes
// (the cost of Replay itself).
//
//   peakmem_cuda_alloc_bench [--benchmark_* flags]
//
// The log imitates training steps: a forward pass over L layers keeps
// each layer's activations (a mix of small tensors and 1-60 MiB ones,
// sizes drawn once per layer so that iterations repeat them, as a real
// program does) and makes and drops temporaries; the backward pass frees
// the activations in reverse, making and dropping gradients. Every
// benchmark reports items/s = events/s.
#include <benchmark/benchmark.h>

#include <array>
#include <random>
#include <vector>

#include "peakmem/allocators/cuda_caching_allocator.h"

namespace {

using namespace peakmem;

AllocLog MakeTrainingLog(int iterations, int layers, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto size = [&]() -> std::int64_t {
    const double u = unit(rng);
    if (u < 0.5) return 1 + static_cast<std::int64_t>(unit(rng) * (1 << 20));            // small
    return (1 << 20) + static_cast<std::int64_t>(unit(rng) * 60.0 * (1 << 20));          // large
  };
  // Per layer: 4 kept activations, 3 temporaries, 4 gradients.
  std::vector<std::array<std::int64_t, 11>> shapes(static_cast<std::size_t>(layers));
  for (auto& layer : shapes) {
    for (std::int64_t& s : layer) s = size();
  }
  AllocLog log;
  log.devices = {"cuda:0"};
  std::int32_t step = 0;
  auto alloc = [&](std::int64_t bytes) {
    StorageRecord s;
    s.bytes = bytes;
    s.made_at = step;
    log.storages.push_back(s);
    const auto id = static_cast<StorageId>(log.storages.size() - 1);
    log.events.push_back(AllocEvent{step, id, bytes, true});
    return id;
  };
  auto free = [&](StorageId id) {
    log.storages[id].freed_at = step;
    log.events.push_back(AllocEvent{step, id, -log.storages[id].bytes, false});
  };
  std::vector<StorageId> kept;
  for (int it = 0; it < iterations; ++it) {
    kept.clear();
    for (const auto& layer : shapes) {
      for (int t = 0; t < 3; ++t) free(alloc(layer[4 + t]));
      for (int a = 0; a < 4; ++a) kept.push_back(alloc(layer[a]));
      ++step;
    }
    for (auto layer = shapes.rbegin(); layer != shapes.rend(); ++layer) {
      std::array<StorageId, 4> grads{};
      for (int g = 0; g < 4; ++g) grads[g] = alloc((*layer)[7 + g]);
      for (int a = 0; a < 4; ++a) free(kept.back()), kept.pop_back();
      for (StorageId g : grads) free(g);
      ++step;
    }
  }
  log.steps = step;
  return log;
}

const AllocLog& Log() {
  // Per layer and iteration: forward 3 temporaries (6 events) + 4 kept
  // activations, backward 4 gradients (8 events) + 4 activation frees: 22
  // events; 500 iterations of 200 layers: 2,200,000 events.
  static const AllocLog log = MakeTrainingLog(500, 200, 42);
  return log;
}

class SumSink final : public AllocSink {
 public:
  void Alloc(StorageId, const StorageRecord& s, std::int32_t) override { bytes += s.bytes; }
  void Free(StorageId, const StorageRecord& s, std::int32_t) override { bytes -= s.bytes; }
  std::int64_t bytes = 0;
};

void BM_ReplayBaseline(benchmark::State& state) {
  const AllocLog& log = Log();
  for (auto _ : state) {
    SumSink sink;
    Replay(log, sink);
    benchmark::DoNotOptimize(sink.bytes);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * log.events.size()));
}

void RunAllocator(benchmark::State& state, CudaCachingOptions options) {
  const AllocLog& log = Log();
  std::int64_t peak = 0;
  for (auto _ : state) {
    CudaAllocatorStats s = SimulateCudaCaching(log, options);
    peak = s.reserved_bytes_peak;
    benchmark::DoNotOptimize(peak);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * log.events.size()));
  state.counters["events"] = static_cast<double>(log.events.size());
  state.counters["reserved_peak_MiB"] = static_cast<double>(peak) / (1 << 20);
}

void BM_CudaCaching(benchmark::State& state) {
  CudaCachingOptions o;
  o.layout_at = CudaLayoutAt::kNone;
  RunAllocator(state, o);
}

void BM_CudaCachingPeakLayout(benchmark::State& state) {
  CudaCachingOptions o;  // the layout at the allocated peak, kept as it rises
  RunAllocator(state, o);
}

void BM_CudaCachingMaxSplit(benchmark::State& state) {
  CudaCachingOptions o;
  o.layout_at = CudaLayoutAt::kNone;
  o.max_split_size = 40 << 20;
  o.roundup_power2_divisions.fill(4);
  RunAllocator(state, o);
}

void BM_CudaCachingBounded(benchmark::State& state) {
  // A device too small for the program: the release / retry paths run,
  // failing allocations are skipped.
  CudaCachingOptions o;
  o.layout_at = CudaLayoutAt::kNone;
  o.device_capacity = std::int64_t{2} << 30;
  o.stop_at_oom = false;
  RunAllocator(state, o);
}

BENCHMARK(BM_ReplayBaseline)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_CudaCaching)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_CudaCachingPeakLayout)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_CudaCachingMaxSplit)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK(BM_CudaCachingBounded)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
