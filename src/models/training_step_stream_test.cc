// The whole step as one allocation event stream (training_step.h): the
// step's Report made from it, and the stream replayed through the CUDA
// caching allocator model agreeing, event by event, with the independent
// reference model (reference_cuda_allocator.h) on 1,000 random steps.
// Figures below are derived by hand from the step of training_step_test.cc
// (f32[4, 8] is 128 bytes, f32[] 4).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "peakmem/allocators/cuda_caching_allocator.h"
#include "peakmem/models/training_step.h"
#include "peakmem/report/attribution.h"
#include "peakmem/report/writer.h"
#include "reference_cuda_allocator.h"
#include "test_util.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

using testing_util::kStepBackward;
using testing_util::kStepForward;
using testing_util::Parse;
using testing_util::StepSpec;

TEST(TrainingStepStream, TheStepIsOneReportOfItsStatements) {
  const TrainingStepResult r =
      SimulateTrainingStep(Parse(kStepForward), Parse(kStepBackward), nullptr, nullptr, StepSpec(), true);
  const Report& step = r.step;
  // The forward's 5 statements, the cotangent, the backward's 17, AccumulateGrad, step() returns.
  ASSERT_EQ(step.steps.size(), 5u + 1 + 17 + 1 + 1);
  ASSERT_EQ(step.phases.size(), 2u);
  EXPECT_EQ(step.phases[0].name, "forward");
  EXPECT_EQ(step.phases[0].first, 0);
  EXPECT_EQ(step.phases[0].end, 5);
  EXPECT_EQ(step.phases[1].name, "backward");
  EXPECT_EQ(step.phases[1].end, 25);
  EXPECT_EQ(step.steps[5].op, "loss.backward");
  EXPECT_EQ(step.steps[23].op, "AccumulateGrad");
  EXPECT_EQ(step.steps[24].op, "step() returns");
  EXPECT_NE(step.steps[0].source.find("forward 1: t0 = torch.mul(x, t_lin_weight)"), std::string::npos);
  // Before the step: w and x (256). The forward peaks at 256 + t0 + t1 +
  // t2 = 516; the cotangent makes it 392 (x, w, t0, t2, cot); t4 520 is
  // the peak (training_step_test.cc); AccumulateGrad keeps t6 as w.grad and
  // frees the rest (t2 stays to the end of the step): 256 + 128 + 4 = 388;
  // step() returns: zero_grad and the loss go, 256.
  EXPECT_EQ(step.steps[0].delta_bytes, 128);  // t0, beside w and x held before the first statement
  EXPECT_EQ(step.steps[4].live_bytes, 388);
  EXPECT_EQ(step.steps[5].live_bytes, 392);
  EXPECT_EQ(step.peak_bytes, 520);
  EXPECT_EQ(step.steps[23].live_bytes, 388);
  EXPECT_EQ(step.final_bytes, 256);
  EXPECT_EQ(step.steps[static_cast<std::size_t>(step.peak_step)].op, "add");
  // Every storage has a step category; at the peak: t0 an activation, t4
  // the loss and the cotangent temporaries.
  ASSERT_EQ(step.storage_categories.size(), step.alloc_log->storages.size());
  EXPECT_EQ(CategoryNames(step)[0], "parameters");
  const std::vector<std::uint8_t> categories = StorageCategories(step);
  std::int64_t activations = 0;
  for (const LiveTensor& t : step.live_at_peak) {
    if (t.role == "activations") activations += t.bytes;
  }
  EXPECT_EQ(activations, 128);
  (void)categories;
  // Every writer renders it.
  for (const ReportWriter* writer : AllWriters()) {
    EXPECT_FALSE(WriteToString(*writer, step).empty()) << writer->name();
  }
}

TEST(TrainingStepStream, CudaCachingAllocatorPricesTheWholeStep) {
  AllocatorOptions allocator;
  allocator.model = AllocatorModel::kCudaCaching;
  const TrainingStepResult r =
      SimulateTrainingStep(Parse(kStepForward), Parse(kStepBackward), nullptr, nullptr, StepSpec(), false, allocator);
  ASSERT_NE(r.step.allocator, nullptr);
  const CudaAllocatorStats& s = r.step.allocator->stats;
  // Every storage is under 1 MiB: each a 512-byte block of one 2 MiB small
  // segment. At the requested peak (w, x, t0, t2, cot, t4) six blocks:
  // 3072 bytes allocated; 2 MiB reserved throughout. At the end w and x:
  // 1024 allocated.
  EXPECT_EQ(s.requested_bytes_peak, 520);
  EXPECT_EQ(s.allocated_bytes_peak, 6 * 512);
  EXPECT_EQ(s.reserved_bytes_peak, 2 << 20);
  EXPECT_EQ(s.allocated_bytes, 2 * 512);
  EXPECT_EQ(r.step.alloc_log, nullptr);  // without `events` the step keeps no stream
}

// On a GPU every storage of the step is on "cuda:0" but Adam's step
// counter, which step() makes on the CPU (peakmem.optimizer_program writes
// each tensor's device): the allocator prices what is on the GPU, requested
// bytes count both.
TEST(TrainingStepStream, TheAllocatorPricesTheStoragesOnTheGpu) {
  const auto on_cuda = [](std::string text) {
    for (std::size_t p = text.find("\"cpu "); p != std::string::npos; p = text.find("\"cpu ", p)) {
      text.replace(p, 5, "\"cuda:0 ");
    }
    return text;
  };
  const std::string t = "cuda:0 f32[4, 8]";
  const ParsedTrace fw = Parse(on_cuda(kStepForward)), bw = Parse(on_cuda(kStepBackward));
  const ParsedTrace first = Parse("def optimizer_step(p0, g0):\n  # p0: \"" + t + "\"\n  # g0: \"" + t +
                                  "\"\n  s0 = torch.full((), 0.0, dtype=torch.float32)  # s0: \"cpu f32[]\"\n"
                                  "  m0 = torch.mul(g0, 0.9)  # m0: \"" + t + "\"\n  return (s0, m0)\n");
  TrainingStepSpec spec = StepSpec();
  spec.optimizer_state = {"s0", "m0"};
  spec.optimizer_name = "Adam";
  AllocatorOptions allocator;
  allocator.model = AllocatorModel::kCudaCaching;
  const TrainingStepResult r = SimulateTrainingStep(fw, bw, &first, nullptr, spec, false, allocator);
  // Held: w, x (256); the optimizer's state stays: s0 (4, on the CPU) and
  // m0 (128): final 388 requested; on the GPU w, x and m0, three 512-byte
  // blocks (384 requested).
  EXPECT_EQ(r.final_bytes, 388);
  EXPECT_EQ(r.step.allocator->device, "cuda:0");
  EXPECT_EQ(r.step.allocator->stats.requested_bytes, 384);
  EXPECT_EQ(r.step.allocator->stats.allocated_bytes, 3 * 512);
}

// A random step of the hand step's shape: random sizes (small, medium and
// large pool requests), extra temporaries, held buffers, input storages,
// iterations, zero_grad, and an optimizer that keeps a state.
struct RandomStep {
  std::string forward, backward, first, later;
  TrainingStepSpec spec;
  bool optimizer = false;
};

std::string Shape(std::int64_t a, std::int64_t b) {
  return "cpu f32[" + std::to_string(a) + ", " + std::to_string(b) + "]";
}

RandomStep MakeRandomStep(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> coin(0, 1), extra(0, 3), steps(1, 3);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Elements from 1 to ~6M (4 B to ~24 MiB), log-uniform.
  const auto elements = [&] { return static_cast<std::int64_t>(std::pow(6.0e6, unit(rng))) + 1; };
  const std::int64_t n = elements(), a = std::max<std::int64_t>(1, n / 8), b = 8;
  const std::string t = Shape(a, b);
  RandomStep out;
  const int temps = extra(rng);
  std::string fw = "def computation(x, t_lin_weight):\n  # x: \"" + t + "\"\n  # t_lin_weight: \"" + t + "\"\n";
  fw += "  t0 = torch.mul(x, t_lin_weight)  # t0: \"" + t + "\"\n";
  fw += "  t1 = torch.mul(t0, t0)  # t1: \"" + t + "\"\n";
  for (int i = 0; i < temps; ++i) {
    fw += "  u" + std::to_string(i) + " = torch.mul(t1, t0)  # u" + std::to_string(i) + ": \"" + t + "\"\n";
  }
  for (int i = 0; i < temps; ++i) fw += "  del u" + std::to_string(i) + "\n";
  fw += "  t2 = torch.sum(t1)  # t2: \"cpu f32[]\"\n  del t1\n";
  fw += "  return {'output': t2, 'flat_args': [x, t_lin_weight], 'flat_output': (t2,)}, ((t0, x), ())\n";
  out.forward = fw;
  std::string bw = kStepBackward;
  const std::string small = "cpu f32[4, 8]";
  for (std::size_t p = bw.find(small); p != std::string::npos; p = bw.find(small, p + t.size())) bw.replace(p, small.size(), t);
  out.backward = bw;
  TrainingStepSpec& spec = out.spec;
  spec = StepSpec();
  const std::int64_t bytes = a * b * 4;
  spec.held = {{"lin", bytes, true}};
  spec.parameter_bytes = bytes;
  for (int i = extra(rng); i > 0; --i) {  // buffers the forward does not read
    const std::int64_t buffer = elements() * 4;
    spec.held.push_back({"buf", buffer, false});
    spec.parameter_bytes += buffer;
  }
  spec.input_storages = {bytes};
  spec.input_bytes = bytes;
  if (coin(rng)) {  // a second input the forward does not read
    spec.input_storages.push_back(elements() * 2);
    spec.input_bytes += spec.input_storages.back();
  }
  spec.steps = steps(rng);
  spec.zero_grad = coin(rng) == 1;
  out.optimizer = coin(rng) == 1;
  if (out.optimizer) {
    const std::string args = "  # p0: \"" + t + "\"\n  # g0: \"" + t + "\"\n";
    out.first = "def optimizer_step(p0, g0):\n" + args + "  m0 = torch.mul(g0, 0.9)  # m0: \"" + t +
                "\"\n  t9 = torch.mul(m0, 0.1)  # t9: \"" + t + "\"\n  del t9\n  return (m0,)\n";
    out.later = "def optimizer_step(p0, g0, m0):\n" + args + "  # m0: \"" + t + "\"\n  t9 = torch.mul(g0, 0.1)  # t9: \"" +
                t + "\"\n  t10 = torch.mul(t9, m0)  # t10: \"" + t + "\"\n  del t9, t10\n  return ()\n";
    spec.optimizer_state = {"m0"};
    spec.optimizer_name = "SGD";
    spec.trainable_bytes = bytes;
  }
  return out;
}

// Replays `log` through the model and the reference, comparing after every event.
void ExpectAgreement(const AllocLog& log, const CudaCachingOptions& options, int seed) {
  CudaCachingAllocator model(options);
  testing_util::ReferenceAllocator ref(options);
  for (std::size_t e = 0; e < log.events.size(); ++e) {
    const AllocEvent& event = log.events[e];
    if (event.alloc) {
      const std::int64_t bytes = log.storages[event.storage].bytes;
      ASSERT_EQ(model.Malloc(event.storage, bytes), ref.Malloc(event.storage, bytes)) << "seed " << seed << " event " << e;
    } else {
      model.Release(event.storage);
      ref.Free(event.storage);
    }
    const CudaAllocatorStats& s = model.stats();
    ASSERT_TRUE(s.allocated_bytes == ref.Allocated() && s.reserved_bytes == ref.Reserved() &&
                s.requested_bytes == ref.Requested() && s.segments == ref.Segments())
        << "seed " << seed << " event " << e << ": allocated " << s.allocated_bytes << " vs " << ref.Allocated()
        << ", reserved " << s.reserved_bytes << " vs " << ref.Reserved();
  }
}

TEST(TrainingStepStream, RandomStepsReplayedAgreeWithTheReferenceAllocator) {
  constexpr int kSteps = 1000;
  std::mt19937_64 rng(20261204);
  std::int64_t events = 0, large = 0;
  for (int seed = 0; seed < kSteps; ++seed) {
    const RandomStep s = MakeRandomStep(rng);
    const ParsedTrace fw = Parse(s.forward), bw = Parse(s.backward);
    std::optional<ParsedTrace> first, later;
    if (s.optimizer) first = Parse(s.first), later = Parse(s.later);
    const TrainingStepResult r = SimulateTrainingStep(fw, bw, first ? &*first : nullptr, later ? &*later : nullptr,
                                                      s.spec, true);
    const AllocLog& log = *r.step.alloc_log;
    // The stream is the step: its requested peak and final bytes are the step's.
    std::int64_t live = 0, peak = 0;
    for (const AllocEvent& e : log.events) peak = std::max(peak, live += e.delta);
    ASSERT_EQ(peak, r.peak_bytes) << "seed " << seed;
    ASSERT_EQ(live, r.final_bytes) << "seed " << seed;
    CudaCachingOptions options;
    options.stop_at_oom = false;
    if (seed % 3 == 1) options.max_split_size = 20 << 20;  // the smallest it takes
    if (seed % 3 == 2) options.roundup_power2_divisions.fill(4);
    ExpectAgreement(log, options, seed);
    if (HasFatalFailure()) return;
    events += static_cast<std::int64_t>(log.events.size());
    for (const StorageRecord& st : log.storages) large += st.bytes > (1 << 20);
  }
  // The sequences reach both pools.
  EXPECT_GT(large, kSteps / 4);
  EXPECT_GT(events, 20 * kSteps);
}

}  // namespace
}  // namespace peakmem
