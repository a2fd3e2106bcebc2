// The memory-bound kernels of a GPT training step on one GPU, as GB/s of the bytes each must
// move at least, next to a device-to-device copy measured in the same process (the ceiling):
//   build/bench/memory_bound_bench [--benchmark_filter=gpt124M]
// Shapes: tokens = 32768 rows (B 32 x T 1024), d = 768 (124M), 1024 (350M) or 2048 (1.3B),
// ffn = 4 d, bf16 activations, f32 gradients / master weights / AdamW state.
// Minimum traffic per call (what "GB/s" divides):
//   layernorm_fwd       read x, write y (bf16), write mean + rstd (f32)
//   residual_ln_fwd     read a, b, write sum, y (bf16), write mean + rstd
//   layernorm_bwd       read dy, x (bf16), read mean + rstd, write dx (bf16)
//   rmsnorm_fwd         read x, write y (bf16), write rstd (f32)
//   rmsnorm_bwd         read dy, x (bf16), read rstd, write dx (bf16)
//   gelu_fwd / _bwd     fwd: read x, write y; bwd: read dy, x, write dx ([tokens, 4d] bf16)
//   cross_entropy_V     read logits, write dlogits in place ([tokens, V] bf16), targets; V =
//                       50304 (GPT-2's 50257 padded), 32000 (LLaMA-2), 128256 (LLaMA-3)
//   adamw               read master, m, v, grad (f32), write master, m, v (f32), param (bf16)
//   grad_norm           read grad (f32)
//   t5_relu_dropout_*   T5-base's DenseReluDense activation, [16384, 3072] bf16 (32 x 512 rows):
//                       fwd read pre, write act; bwd read dact, pre, write dpre. _two_ops: relu
//                       then dropout as two kernels (the bytes counted are still one pass's);
//                       _one_pass: ops::activation_dropout_* (same bits)
// the parameter count n of adamw / grad_norm is the model's (124M: 124.4M, 1.3B: 1.31B).
// Counters: GB/s, and of_copy = GB/s over the copy's (1 GiB read + 1 GiB written per call).
// Timed with CUDA events around 5 back-to-back calls per iteration after a warm-up call.
// Without a GPU every benchmark reports "no CUDA device".
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/cuda_check.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "ops/activation.h"
#include "ops/adamw.h"
#include "ops/cross_entropy.h"
#include "ops/gelu.h"
#include "ops/grad_norm.h"
#include "ops/init_normal.h"
#include "ops/layernorm.h"
#include "ops/rmsnorm.h"

namespace anvil {
namespace {

using engine::DType;
using engine::Stream;
using engine::TensorView;

constexpr int64_t kTokens = 32768;
constexpr int kCallsPerIteration = 5;

// One allocation per case, carved into operands filled on the device.
class Buffers {
 public:
  explicit Buffers(size_t bytes) {
    auto arena = engine::Arena::create(engine::Device::kCuda, bytes, "memory_bound_bench");
    ANVIL_CHECK_OK(arena.status());
    arena_ = std::move(arena).value();
  }
  // [shape] of dtype, N(0, sigma) from seed (sigma 0, or an integer dtype: zeros).
  TensorView take(DType dtype, std::vector<int64_t> shape, uint64_t seed, double sigma,
                  Stream& stream) {
    auto v = arena_.allocate(dtype, std::move(shape), "operand");
    ANVIL_CHECK_OK(v.status());
    if (dtype == DType::kI32) {
      ANVIL_CUDA_CHECK(cudaMemsetAsync(v->data, 0, v->bytes(), stream.cuda_stream()));
      return *v;
    }
    ops::InitNormalArgs init;
    init.kind = sigma == 0 ? ops::InitKind::kConstant : ops::InitKind::kNormal;
    init.sigma = sigma;
    init.seed = seed;
    init.tp = ops::TpSplit{v->numel(), 1};
    ops::init_normal(init, *v, stream);
    return *v;
  }
  engine::Workspace workspace(size_t bytes) {
    auto ws = arena_.allocate_workspace(bytes, "workspace");
    ANVIL_CHECK_OK(ws.status());
    return *ws;
  }

 private:
  engine::Arena arena_;
};

engine::Event make_event() {
  auto e = engine::Event::create();
  ANVIL_CHECK_OK(e.status());
  return std::move(e).value();
}

// Seconds per call of `run`, averaged over kCallsPerIteration back-to-back calls.
double seconds_per_call(const std::function<void()>& run, Stream& stream) {
  static engine::Event start = make_event(), stop = make_event();
  start.record(stream);
  for (int i = 0; i < kCallsPerIteration; ++i) run();
  stop.record(stream);
  return stop.elapsed_ms_since(start) / 1e3 / kCallsPerIteration;
}

// GB/s of a 1 GiB device-to-device copy (read + write), best of 10, once per process.
double copy_gbps() {
  static const double measured = [] {
    auto stream = Stream::cuda(0);
    ANVIL_CHECK_OK(stream.status());
    const size_t bytes = size_t{1} << 30;
    Buffers buf(2 * bytes + (1 << 20));
    TensorView src = buf.take(DType::kF32, {static_cast<int64_t>(bytes / 4)}, 1, 1.0, *stream);
    TensorView dst = buf.take(DType::kF32, {static_cast<int64_t>(bytes / 4)}, 0, 0.0, *stream);
    auto copy = [&] {
      ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice,
                                       stream->cuda_stream()));
    };
    copy();
    double best = 0;
    for (int i = 0; i < 10; ++i) {
      best = std::max(best, 2.0 * bytes / seconds_per_call(copy, *stream) / 1e9);
    }
    return best;
  }();
  return measured;
}

// A kernel under test: its minimum bytes per call and a closure that runs it once.
struct Kernel {
  double bytes = 0;
  std::function<void()> run;
};

// Builds a case's operands (into `buf`) and its Kernel.
using CaseFactory = std::function<Kernel(Buffers& buf, Stream& stream)>;

void bench_kernel(benchmark::State& state, size_t arena_bytes, CaseFactory factory) {
  if (engine::cuda_device_count() < 1) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const double ceiling = copy_gbps();
  auto stream = Stream::cuda(0);
  ANVIL_CHECK_OK(stream.status());
  Buffers buf(arena_bytes);
  const Kernel k = factory(buf, *stream);
  k.run();  // warm-up
  double seconds = 0;
  for (auto _ : state) {
    const double s = seconds_per_call(k.run, *stream);
    seconds += s;
    state.SetIterationTime(s);
  }
  const double gbps = k.bytes / (seconds / static_cast<double>(state.iterations())) / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["of_copy"] = gbps / ceiling;
  state.counters["copy_GB/s"] = ceiling;
}

constexpr size_t kSlack = size_t{64} << 20;  // alignment, small vectors, workspaces

Kernel layernorm_fwd(Buffers& buf, Stream& s, int64_t d) {
  const ops::LayerNormArgs a{kTokens, d};
  TensorView x = buf.take(DType::kBF16, {kTokens, d}, 1, 1.0, s);
  TensorView y = buf.take(DType::kBF16, {kTokens, d}, 0, 0.0, s);
  TensorView mean = buf.take(DType::kF32, {kTokens}, 0, 0.0, s);
  TensorView rstd = buf.take(DType::kF32, {kTokens}, 0, 0.0, s);
  TensorView gamma = buf.take(DType::kBF16, {d}, 2, 1.0, s);
  TensorView beta = buf.take(DType::kBF16, {d}, 3, 1.0, s);
  return {4.0 * kTokens * d + 8.0 * kTokens,
          [=, &s] { ops::layernorm_forward(a, y, mean, rstd, x, gamma, beta, s); }};
}

Kernel residual_ln_fwd(Buffers& buf, Stream& s, int64_t d) {
  const ops::LayerNormArgs a{kTokens, d};
  TensorView x = buf.take(DType::kBF16, {kTokens, d}, 1, 1.0, s);
  TensorView r = buf.take(DType::kBF16, {kTokens, d}, 4, 1.0, s);
  TensorView sum = buf.take(DType::kBF16, {kTokens, d}, 0, 0.0, s);
  TensorView y = buf.take(DType::kBF16, {kTokens, d}, 0, 0.0, s);
  TensorView mean = buf.take(DType::kF32, {kTokens}, 0, 0.0, s);
  TensorView rstd = buf.take(DType::kF32, {kTokens}, 0, 0.0, s);
  TensorView gamma = buf.take(DType::kBF16, {d}, 2, 1.0, s);
  TensorView beta = buf.take(DType::kBF16, {d}, 3, 1.0, s);
  return {8.0 * kTokens * d + 8.0 * kTokens, [=, &s] {
            ops::residual_layernorm_forward(a, sum, y, mean, rstd, x, r, gamma, beta, s);
          }};
}

Kernel layernorm_bwd(Buffers& buf, Stream& s, int64_t d) {
  const ops::LayerNormArgs a{kTokens, d};
  TensorView x = buf.take(DType::kBF16, {kTokens, d}, 1, 1.0, s);
  TensorView dy = buf.take(DType::kBF16, {kTokens, d}, 5, 1.0, s);
  TensorView dx = buf.take(DType::kBF16, {kTokens, d}, 0, 0.0, s);
  TensorView gamma = buf.take(DType::kBF16, {d}, 2, 1.0, s);
  TensorView mean = buf.take(DType::kF32, {kTokens}, 6, 0.1, s);
  TensorView rstd = buf.take(DType::kF32, {kTokens}, 7, 0.1, s);
  TensorView dgamma = buf.take(DType::kF32, {d}, 0, 0.0, s);
  TensorView dbeta = buf.take(DType::kF32, {d}, 0, 0.0, s);
  const engine::Workspace ws = buf.workspace(ops::layernorm_backward_workspace_bytes(a));
  return {6.0 * kTokens * d + 8.0 * kTokens, [=, &s] {
            ops::layernorm_backward(a, ops::Accumulate::kOverwrite, dx, dgamma, dbeta, dy, x, gamma,
                                    mean, rstd, ws, s);
          }};
}

Kernel rmsnorm_fwd(Buffers& buf, Stream& s, int64_t d) {
  const ops::RmsNormArgs a{kTokens, d};
  TensorView x = buf.take(DType::kBF16, {kTokens, d}, 1, 1.0, s);
  TensorView y = buf.take(DType::kBF16, {kTokens, d}, 0, 0.0, s);
  TensorView rstd = buf.take(DType::kF32, {kTokens}, 0, 0.0, s);
  TensorView gamma = buf.take(DType::kBF16, {d}, 2, 1.0, s);
  return {4.0 * kTokens * d + 4.0 * kTokens,
          [=, &s] { ops::rmsnorm_forward(a, y, rstd, x, gamma, s); }};
}

Kernel rmsnorm_bwd(Buffers& buf, Stream& s, int64_t d) {
  const ops::RmsNormArgs a{kTokens, d};
  TensorView x = buf.take(DType::kBF16, {kTokens, d}, 1, 1.0, s);
  TensorView dy = buf.take(DType::kBF16, {kTokens, d}, 5, 1.0, s);
  TensorView dx = buf.take(DType::kBF16, {kTokens, d}, 0, 0.0, s);
  TensorView gamma = buf.take(DType::kBF16, {d}, 2, 1.0, s);
  TensorView rstd = buf.take(DType::kF32, {kTokens}, 7, 0.1, s);
  TensorView dgamma = buf.take(DType::kF32, {d}, 0, 0.0, s);
  const engine::Workspace ws = buf.workspace(ops::rmsnorm_backward_workspace_bytes(a));
  return {6.0 * kTokens * d + 4.0 * kTokens, [=, &s] {
            ops::rmsnorm_backward(a, ops::Accumulate::kOverwrite, dx, dgamma, dy, x, gamma, rstd,
                                  ws, s);
          }};
}

Kernel gelu_fwd(Buffers& buf, Stream& s, int64_t d) {
  TensorView x = buf.take(DType::kBF16, {kTokens, 4 * d}, 1, 1.0, s);
  TensorView y = buf.take(DType::kBF16, {kTokens, 4 * d}, 0, 0.0, s);
  return {4.0 * kTokens * 4 * d, [=, &s] { ops::gelu_forward(y, x, s); }};
}

Kernel gelu_bwd(Buffers& buf, Stream& s, int64_t d) {
  TensorView x = buf.take(DType::kBF16, {kTokens, 4 * d}, 1, 1.0, s);
  TensorView dy = buf.take(DType::kBF16, {kTokens, 4 * d}, 5, 1.0, s);
  TensorView dx = buf.take(DType::kBF16, {kTokens, 4 * d}, 0, 0.0, s);
  return {6.0 * kTokens * 4 * d, [=, &s] { ops::gelu_backward(dx, dy, x, s); }};
}

// In place like the model's (dlogits aliases logits), so every call after the first reads the
// previous call's gradients: the traffic is the same and the values stay finite.
Kernel cross_entropy(Buffers& buf, Stream& s, int64_t vocab, int64_t padded) {
  ops::CrossEntropyArgs a{kTokens, vocab, padded};
  a.grad_scale = 1.0f / kTokens;
  TensorView logits = buf.take(DType::kBF16, {kTokens, padded}, 1, 2.0, s);
  TensorView losses = buf.take(DType::kF32, {kTokens}, 0, 0.0, s);
  TensorView targets = buf.take(DType::kI32, {kTokens}, 0, 0.0, s);  // token 0
  return {4.0 * kTokens * padded + 8.0 * kTokens,
          [=, &s] { ops::softmax_cross_entropy(a, losses, logits, logits, targets, s); }};
}

Kernel adamw(Buffers& buf, Stream& s, int64_t n) {
  ops::AdamWArgs a{1e-4f};
  a.weight_decay = 0.1f;
  a.step = 10;
  TensorView master = buf.take(DType::kF32, {n}, 1, 0.02, s);
  TensorView m = buf.take(DType::kF32, {n}, 2, 1e-3, s);
  TensorView v = buf.take(DType::kF32, {n}, 0, 0.0, s);
  TensorView grad = buf.take(DType::kF32, {n}, 3, 1e-3, s);
  TensorView param = buf.take(DType::kBF16, {n}, 0, 0.0, s);
  return {30.0 * n, [=, &s] { ops::adamw_update(a, master, m, v, param, grad, s); }};
}

Kernel grad_norm(Buffers& buf, Stream& s, int64_t n) {
  TensorView grad = buf.take(DType::kF32, {n}, 3, 1e-3, s);
  TensorView out = buf.take(DType::kF32, {1}, 0, 0.0, s);
  const engine::Workspace ws = buf.workspace(ops::sum_squares_workspace_bytes(n));
  return {4.0 * n, [=, &s] { ops::sum_squares(out, grad, ws, s); }};
}

// T5-base's MLP activation with its dropout 0.1: relu then dropout (two kernels), or one pass.
constexpr int64_t kT5Rows = 32 * 512, kT5Ffn = 3072;

Kernel t5_relu_dropout(Buffers& buf, Stream& s, bool backward, bool one_pass) {
  const ops::DropoutArgs drop{0.1f, 1234, 0};
  TensorView pre = buf.take(DType::kBF16, {kT5Rows, kT5Ffn}, 1, 1.0, s);
  TensorView out = buf.take(DType::kBF16, {kT5Rows, kT5Ffn}, 5, 1.0, s);
  const double n = static_cast<double>(kT5Rows * kT5Ffn);
  if (!backward) {
    return {4.0 * n, [=, &s] {
              if (one_pass) {
                ops::activation_dropout_forward(ops::Activation::kRelu, drop, out, pre, s);
              } else {
                ops::activation_forward(ops::Activation::kRelu, out, pre, s);
                ops::dropout_forward(drop, out, out, s);
              }
            }};
  }
  return {6.0 * n, [=, &s] {  // in place over dact, as the MLP
            if (one_pass) {
              ops::activation_dropout_backward(ops::Activation::kRelu, drop, out, out, pre, s);
            } else {
              ops::dropout_backward(drop, out, out, s);
              ops::activation_backward(ops::Activation::kRelu, out, out, pre, s);
            }
          }};
}

void register_model(const std::string& model, int64_t d, int64_t params) {
  const size_t act = static_cast<size_t>(kTokens * d) * 2;  // one [tokens, d] bf16 tensor
  struct Entry {
    const char* name;
    size_t bytes;
    CaseFactory factory;
  };
  const std::vector<Entry> entries = {
      {"layernorm_fwd", 2 * act, [d](Buffers& b, Stream& s) { return layernorm_fwd(b, s, d); }},
      {"residual_ln_fwd", 4 * act, [d](Buffers& b, Stream& s) { return residual_ln_fwd(b, s, d); }},
      {"layernorm_bwd", 3 * act, [d](Buffers& b, Stream& s) { return layernorm_bwd(b, s, d); }},
      {"rmsnorm_fwd", 2 * act, [d](Buffers& b, Stream& s) { return rmsnorm_fwd(b, s, d); }},
      {"rmsnorm_bwd", 3 * act, [d](Buffers& b, Stream& s) { return rmsnorm_bwd(b, s, d); }},
      {"gelu_fwd", 8 * act, [d](Buffers& b, Stream& s) { return gelu_fwd(b, s, d); }},
      {"gelu_bwd", 12 * act, [d](Buffers& b, Stream& s) { return gelu_bwd(b, s, d); }},
      {"adamw", static_cast<size_t>(params) * 18,
       [params](Buffers& b, Stream& s) { return adamw(b, s, params); }},
      {"grad_norm", static_cast<size_t>(params) * 4,
       [params](Buffers& b, Stream& s) { return grad_norm(b, s, params); }},
  };
  for (const Entry& e : entries) {
    benchmark::RegisterBenchmark((model + "/" + e.name).c_str(), bench_kernel, e.bytes + kSlack,
                                 e.factory)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

[[maybe_unused]] const bool kRegistered = [] {
  register_model("gpt124M", 768, 124439808);
  register_model("gpt350M", 1024, 354823168);
  register_model("gpt1.3B", 2048, 1313722368);
  for (const bool backward : {false, true}) {
    for (const bool one_pass : {false, true}) {
      const std::string name = std::string("t5_relu_dropout_") + (backward ? "bwd" : "fwd") +
                               (one_pass ? "_one_pass" : "_two_ops");
      benchmark::RegisterBenchmark(name.c_str(), bench_kernel,
                                   static_cast<size_t>(kT5Rows * kT5Ffn) * 4 + kSlack,
                                   [backward, one_pass](Buffers& b, Stream& s) {
                                     return t5_relu_dropout(b, s, backward, one_pass);
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  // {vocab, padded}: GPT-2 (padded to a multiple of 64), LLaMA-2, LLaMA-3.
  for (const auto& [vocab, padded] :
       std::vector<std::pair<int64_t, int64_t>>{{50257, 50304}, {32000, 32000}, {128256, 128256}}) {
    benchmark::RegisterBenchmark(("cross_entropy_" + std::to_string(padded)).c_str(), bench_kernel,
                                 static_cast<size_t>(kTokens * padded) * 2 + kSlack,
                                 [vocab = vocab, padded = padded](Buffers& b, Stream& s) {
                                   return cross_entropy(b, s, vocab, padded);
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace anvil

BENCHMARK_MAIN();
