// The GEMMs of a GPT-2 training step through ops::gemm (cuBLASLt, bf16 in, f32 accumulate) on
// one GPU, next to a 8192^3 bf16 GEMM measured in the same process (the practical ceiling):
//   build/bench/gemm_bench [--benchmark_filter=gpt1.3B/fc]
// Models (tokens = 32768 rows per GEMM, vocabulary 50304, ffn = 4 d): GPT-2 124M (d 768),
// 350M (d 1024), 1.3B (d 2048). Per linear layer y [t, out] = x [t, in] W^T + b:
//   qkv (d -> 3d, bias), attn_proj (d -> d, bias), fc (d -> 4d, bias + GELU saving pre_gelu),
//   mlp_proj (4d -> d, bias), lm_head (d -> vocab, no bias: the tied embedding);
// three passes, named as the model runs them (model/stack/gpt_pass.cc):
//   fwd    y = x W^T (+ epilogue)                      m = t,   n = out, k = in
//   dgrad  dx = dy W  (mlp_proj: * gelu'(pre_gelu))     m = t,   n = in,  k = out
//   wgrad  dW += dy^T x   (f32 D, beta = 1)             m = out, n = in,  k = t
// Counters: TFLOP/s = 2 m n k / time, and of_ceiling = that over the 8192^3 GEMM's TFLOP/s.
// Operands are filled on the device with ops::init_normal (no host traffic); timed with CUDA
// events around 5 back-to-back calls per iteration after one warm-up call (which also builds
// the cuBLASLt plan). Without a GPU every benchmark reports "no CUDA device".
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "ops/gemm.h"
#include "ops/init_normal.h"

namespace anvil {
namespace {

using engine::DType;
using engine::TensorView;
using ops::Epilogue;
using ops::GemmArgs;

constexpr int64_t kTokens = 32768;
constexpr int64_t kVocab = 50304;
constexpr size_t kGemmWorkspaceBytes = 32u << 20;  // what cuBLASLt wants on Hopper
constexpr int kCallsPerIteration = 5;

// One GEMM configuration: args plus which optional operands it has.
struct GemmCase {
  GemmArgs args;
  DType d_dtype = DType::kBF16;
};

// Device memory for one case, filled on the device: A, B ~ N(0, 1) bf16, bias and pre_gelu
// N(0, 1) bf16, D zero (beta = 1 accumulates into it).
class Operands {
 public:
  Operands(const GemmCase& c, engine::Stream& stream) {
    const GemmArgs& g = c.args;
    const int64_t na = g.m * g.k, nb = g.k * g.n, nd = g.m * g.n;
    const bool has_bias = g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu;
    const bool has_pre = g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu;
    const size_t bytes = engine::align_up(static_cast<size_t>(na) * 2) +
                         engine::align_up(static_cast<size_t>(nb) * 2) +
                         engine::align_up(static_cast<size_t>(nd) * engine::dtype_size(c.d_dtype)) +
                         engine::align_up(static_cast<size_t>(g.n) * 2) +
                         engine::align_up(static_cast<size_t>(nd) * 2) +
                         engine::align_up(kGemmWorkspaceBytes);
    auto arena = engine::Arena::create(engine::Device::kCuda, bytes, "gemm_bench");
    ANVIL_CHECK_OK(arena.status());
    arena_ = std::move(arena).value();
    a_ = take(DType::kBF16, na, 1, stream);
    b_ = take(DType::kBF16, nb, 2, stream);
    d_ = take(c.d_dtype, nd, 0, stream);
    if (has_bias) bias_ = take(DType::kBF16, g.n, 3, stream);
    if (has_pre) pre_ = take(DType::kBF16, nd, 4, stream);
    auto ws = arena_.allocate_workspace(kGemmWorkspaceBytes, "cublaslt");
    ANVIL_CHECK_OK(ws.status());
    stream.set_gemm_workspace(*ws);
  }

  void run(const GemmArgs& g, engine::Stream& stream) {
    ops::gemm(g, d_, a_, b_, bias_, pre_, stream);
  }

 private:
  // [n] of dtype: seed 0 is zeros, otherwise N(0, 1) from that seed.
  TensorView take(DType dtype, int64_t n, uint64_t seed, engine::Stream& stream) {
    auto v = arena_.allocate(dtype, {n}, "operand");
    ANVIL_CHECK_OK(v.status());
    ops::InitNormalArgs init;
    init.kind = seed == 0 ? ops::InitKind::kConstant : ops::InitKind::kNormal;
    init.sigma = 1.0;
    init.seed = seed;
    init.tp = ops::TpSplit{n, 1};
    ops::init_normal(init, *v, stream);
    return *v;
  }

  engine::Arena arena_;
  TensorView a_, b_, d_, bias_, pre_;
};

engine::Event make_event() {
  auto e = engine::Event::create();
  ANVIL_CHECK_OK(e.status());
  return std::move(e).value();
}

// Seconds per call of a GEMM, averaged over kCallsPerIteration back-to-back calls.
class Timer {
 public:
  Timer() : start_(make_event()), stop_(make_event()) {}
  double seconds_per_call(Operands& ops, const GemmArgs& g, engine::Stream& stream) {
    start_.record(stream);
    for (int i = 0; i < kCallsPerIteration; ++i) ops.run(g, stream);
    stop_.record(stream);
    return stop_.elapsed_ms_since(start_) / 1e3 / kCallsPerIteration;
  }

 private:
  engine::Event start_, stop_;
};

double tflops(const GemmArgs& g, double seconds) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.batch) / seconds / 1e12;
}

GemmCase ceiling_case() {
  GemmCase c;
  c.args = GemmArgs{8192, 8192, 8192};
  c.args.trans_b = true;  // the linear-layer layout (TN for cuBLASLt)
  return c;
}

// TFLOP/s of the 8192^3 bf16 GEMM, measured once per process (best of 10 timed iterations).
double ceiling_tflops() {
  static const double measured = [] {
    auto stream = engine::Stream::cuda(0);
    ANVIL_CHECK_OK(stream.status());
    const GemmCase c = ceiling_case();
    Operands ops(c, *stream);
    ops.run(c.args, *stream);
    Timer timer;
    double best = 0;
    for (int i = 0; i < 10; ++i) {
      const double t = tflops(c.args, timer.seconds_per_call(ops, c.args, *stream));
      if (t > best) best = t;
    }
    return best;
  }();
  return measured;
}

void bench_gemm(benchmark::State& state, GemmCase c) {
  if (engine::cuda_device_count() < 1) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const double ceiling = ceiling_tflops();
  auto stream = engine::Stream::cuda(0);
  ANVIL_CHECK_OK(stream.status());
  Operands ops(c, *stream);
  ops.run(c.args, *stream);  // warm-up: builds the plan
  Timer timer;
  double seconds = 0;
  for (auto _ : state) {
    const double s = timer.seconds_per_call(ops, c.args, *stream);
    seconds += s;
    state.SetIterationTime(s);
  }
  const double t = tflops(c.args, seconds / static_cast<double>(state.iterations()));
  state.counters["TFLOP/s"] = t;
  state.counters["of_ceiling"] = t / ceiling;
  state.counters["ceiling_TFLOP/s"] = ceiling;
}

struct Linear {
  const char* name;
  int64_t in, out;
  Epilogue fwd;                      // forward epilogue
  Epilogue dgrad = Epilogue::kNone;  // input-gradient epilogue
};

void register_model(const std::string& model, int64_t d) {
  const std::vector<Linear> linears = {
      {"qkv", d, 3 * d, Epilogue::kBias},
      {"attn_proj", d, d, Epilogue::kBias},
      {"fc", d, 4 * d, Epilogue::kBiasGelu},
      // The input gradient of mlp_proj is the fc output gradient through GELU.
      {"mlp_proj", 4 * d, d, Epilogue::kBias, Epilogue::kDGelu},
      {"lm_head", d, kVocab, Epilogue::kNone},
  };
  for (const Linear& l : linears) {
    GemmCase fwd;
    fwd.args = GemmArgs{kTokens, l.out, l.in};
    fwd.args.trans_b = true;
    fwd.args.epilogue = l.fwd;
    GemmCase dgrad;
    dgrad.args = GemmArgs{kTokens, l.in, l.out};
    dgrad.args.epilogue = l.dgrad;
    GemmCase wgrad;
    wgrad.args = GemmArgs{l.out, l.in, kTokens};
    wgrad.args.trans_a = true;
    wgrad.args.beta = 1.0f;
    wgrad.d_dtype = DType::kF32;
    for (const auto& [pass, c] : {std::pair<const char*, GemmCase>{"fwd", fwd},
                                  std::pair<const char*, GemmCase>{"dgrad", dgrad},
                                  std::pair<const char*, GemmCase>{"wgrad", wgrad}}) {
      benchmark::RegisterBenchmark((model + "/" + l.name + "/" + pass).c_str(), bench_gemm, c)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RegisterBenchmark("ceiling/8192^3", anvil::bench_gemm, anvil::ceiling_case())
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  anvil::register_model("gpt124M", 768);
  anvil::register_model("gpt350M", 1024);
  anvil::register_model("gpt1.3B", 2048);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
