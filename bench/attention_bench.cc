// Flash attention forward and forward+backward on one GPU (ops/flash_attention.h), bf16 or f16
// (range 4 of the GPT shapes: 1 = f16), with the GPT layout (q, k, v as column views of a fused
// [B*T, 3*H*Dh] buffer); head sizes 64 and 128 (GPT-2, 1.3B), 80 (BLOOM-3b), 96 (BLOOM-1b1),
// the last two run in zero-padded tiles of 96 and 128 columns. Reports TFLOP/s
// with the FlashAttention papers' count: forward 4 B H T^2 Dh (halved when causal), backward
// 2.5x forward (so forward+backward counts 3.5x).
//   build/bench/attention_bench [--benchmark_filter=...]
// bench/reference/attention_sdpa.py times PyTorch SDPA on the same shapes.
// BM_FlashT5* time T5-base's shapes (B 32, 12 heads of 64, encoder 512 bidirectional, decoder 114
// causal, scale 1) with and without the relative-bucket bias (range 4: 1 = with) and the
// probability dropout 0.1 (range 5: 1 = with, the backward redrawing the mask; 2 = with, the
// mask saved by the forward as bits, AttentionMasks::dropout_keep).
// BM_FlashForwardWgmma* time the Hopper forward (AttentionKernel::kWgmma: sm_90a wgmma + TMA) on
// the bf16 head 64 and 128 shapes, beside BM_FlashForward* (mma.sync) of the same shapes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/arena.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "ops/flash_attention.h"

namespace anvil {
namespace {

using engine::DType;

// Host values in [-1, 1) as v's dtype (bf16 or f16), copied into v.
void fill_random(engine::TensorView v, uint32_t seed, const engine::Stream& s) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> h(static_cast<size_t>(v.numel()));
  for (uint16_t& x : h) {
    x = v.dtype == DType::kF16 ? engine::f32_to_f16(u(rng)) : engine::f32_to_bf16(u(rng));
  }
  engine::copy(v, engine::make_view(h.data(), v.dtype, engine::Device::kCpu, {v.numel()}), s);
  s.synchronize();
}

// Host values copied into v (of their dtype).
template <typename T>
void fill_host(engine::TensorView v, const std::vector<T>& h, DType dt, const engine::Stream& s) {
  engine::copy(
      v,
      engine::make_view(static_cast<const void*>(h.data()), dt, engine::Device::kCpu, {v.numel()}),
      s);
  s.synchronize();
}

// t5: T5's scale and, per state.range(4) and range(5), relative-bucket bias (32 buckets) and
// dropout.
void bench_attention(benchmark::State& state, bool causal, bool backward, bool t5 = false,
                     ops::AttentionKernel kernel = ops::AttentionKernel::kMmaSync) {
  if (engine::cuda_device_count() < 1) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t B = state.range(0), T = state.range(1), H = state.range(2), Dh = state.range(3);
  const DType act = !t5 && state.range(4) == 1 ? DType::kF16 : DType::kBF16;
  auto stream_or = engine::Stream::cuda(0);
  ANVIL_CHECK_OK(stream_or.status());
  engine::Stream& stream = *stream_or;
  const int64_t hd = H * Dh, bt = B * T;
  ops::FlashAttentionArgs a;
  a.batch = B, a.q_len = a.kv_len = T, a.heads = H, a.head_dim = Dh, a.causal = causal;
  a.scale = t5 ? 1.0f : 0.125f;
  a.kernel = kernel;
  const bool rel = t5 && state.range(4) == 1;
  constexpr int64_t kBuckets = 32;
  if (t5 && state.range(5) >= 1) a.dropout_p = 0.1f, a.seed = 7;
  if (rel) a.bias = ops::AttentionBias::kRelativeBuckets;
  const size_t ws_bytes = ops::flash_attention_workspace_bytes(a, kBuckets);
  auto arena_or = engine::Arena::create(
      engine::Device::kCuda, static_cast<size_t>(bt * hd) * 2 * 8 + 2 * ws_bytes + (1 << 20),
      "attention_bench");
  ANVIL_CHECK_OK(arena_or.status());
  engine::Arena& mem = *arena_or;
  auto keep_or = engine::Arena::create(engine::Device::kCuda,
                                       sizeof(int32_t) * ops::flash_attention_keep_words(a) + 256,
                                       "attention_bench keep bits");
  ANVIL_CHECK_OK(keep_or.status());
  auto view = [&](DType dt, std::initializer_list<int64_t> shape) {
    auto v = mem.allocate(dt, shape, "bench tensor");
    ANVIL_CHECK_OK(v.status());
    return *v;
  };
  engine::TensorView qkv = view(act, {bt, 3 * hd});
  engine::TensorView dqkv = view(act, {bt, 3 * hd});
  engine::TensorView out = view(act, {bt, hd});
  engine::TensorView dout = view(act, {bt, hd});
  engine::TensorView lse = view(DType::kF32, {B, H, T});
  ops::AttentionMasks masks;
  if (t5 && state.range(5) == 2) {
    auto keep = keep_or->allocate(DType::kI32, {ops::flash_attention_keep_words(a)}, "keep bits");
    ANVIL_CHECK_OK(keep.status());
    masks.dropout_keep = *keep;
  }
  engine::TensorView d_table;
  if (rel) {
    // Any bucket pattern costs the same; this one is T5-like (exact near, coarser far).
    std::vector<int32_t> buckets;
    for (int64_t d = -(T - 1); d < T; ++d) {
      const int64_t n = std::min<int64_t>(std::abs(d), 8 + std::abs(d) / 32);
      buckets.push_back(static_cast<int32_t>(std::min<int64_t>(n, 15) + (d > 0 ? 16 : 0)));
    }
    engine::TensorView b = view(DType::kI32, {2 * T - 1});
    engine::TensorView table = view(DType::kF32, {kBuckets, H});
    d_table = view(DType::kF32, {kBuckets, H});
    fill_host(b, buckets, DType::kI32, stream);
    fill_host(table, std::vector<float>(kBuckets * H, 0.5f), DType::kF32, stream);
    fill_host(d_table, std::vector<float>(kBuckets * H, 0.0f), DType::kF32, stream);
    masks.rel_buckets = b;
    masks.rel_table = table;
  }
  auto ws_or = mem.allocate_workspace(ws_bytes, "attention workspace");
  ANVIL_CHECK_OK(ws_or.status());
  const engine::Workspace ws = *ws_or;
  fill_random(qkv, 1, stream);
  fill_random(dout, 2, stream);
  auto q = engine::slice_cols(qkv, 0, hd), k = engine::slice_cols(qkv, hd, 2 * hd),
       v = engine::slice_cols(qkv, 2 * hd, 3 * hd);
  auto dq = engine::slice_cols(dqkv, 0, hd), dk = engine::slice_cols(dqkv, hd, 2 * hd),
       dv = engine::slice_cols(dqkv, 2 * hd, 3 * hd);
  auto step = [&] {
    ops::flash_attention_forward(a, out, lse, q, k, v, masks, stream);
    if (backward) {
      ops::flash_attention_backward(a, dq, dk, dv, d_table, dout, q, k, v, out, lse, masks, ws,
                                    stream);
    }
  };
  step();
  stream.synchronize();
  auto start = engine::Event::create(), stop = engine::Event::create();
  ANVIL_CHECK_OK(start.status());
  ANVIL_CHECK_OK(stop.status());
  double seconds = 0;
  for (auto _ : state) {
    start->record(stream);
    for (int i = 0; i < 10; ++i) step();
    stop->record(stream);
    const double s = stop->elapsed_ms_since(*start) / 1e3 / 10;
    seconds += s;
    state.SetIterationTime(s);
  }
  const double fwd = 4.0 * B * H * T * T * Dh * (causal ? 0.5 : 1.0);
  state.counters["TFLOP/s"] =
      (backward ? 3.5 : 1.0) * fwd * static_cast<double>(state.iterations()) / seconds / 1e12;
}

void args(benchmark::internal::Benchmark* b) {
  // B*T = 16K tokens, 2048 model width: GPT-2-like (Dh 64) and 1.3B-like (Dh 128) heads; BLOOM-3b
  // (32 heads of 80) and BLOOM-1b1 (16 of 96); f16 at T 2048.
  for (int64_t t : {1024, 2048}) {
    b->Args({16384 / t, t, 32, 64, 0});
    b->Args({16384 / t, t, 16, 128, 0});
  }
  b->Args({8, 2048, 32, 80, 0});
  b->Args({8, 2048, 16, 96, 0});
  b->Args({8, 2048, 32, 64, 1});
  b->Args({8, 2048, 16, 128, 1});
  // A fixed count: the setup (host random fill of ~130M values) runs once per benchmark instead
  // of once per trial of Google Benchmark's iteration search.
  b->Iterations(10)->UseManualTime()->Unit(benchmark::kMillisecond);
}

void BM_FlashForwardCausal(benchmark::State& s) { bench_attention(s, true, false); }
void BM_FlashForwardBackwardCausal(benchmark::State& s) { bench_attention(s, true, true); }
void BM_FlashForward(benchmark::State& s) { bench_attention(s, false, false); }
void BM_FlashForwardBackward(benchmark::State& s) { bench_attention(s, false, true); }
BENCHMARK(BM_FlashForwardCausal)->Apply(args);
BENCHMARK(BM_FlashForwardBackwardCausal)->Apply(args);
BENCHMARK(BM_FlashForward)->Apply(args);
BENCHMARK(BM_FlashForwardBackward)->Apply(args);

void wgmma_args(benchmark::internal::Benchmark* b) {
  for (int64_t t : {1024, 2048, 4096}) {
    b->Args({16384 / t, t, 32, 64, 0});
    b->Args({16384 / t, t, 16, 128, 0});
  }
  b->Iterations(10)->UseManualTime()->Unit(benchmark::kMillisecond);
}
void BM_FlashForwardWgmmaCausal(benchmark::State& s) {
  bench_attention(s, true, false, false, ops::AttentionKernel::kWgmma);
}
void BM_FlashForwardWgmma(benchmark::State& s) {
  bench_attention(s, false, false, false, ops::AttentionKernel::kWgmma);
}
void BM_FlashForwardMmaSyncCausal(benchmark::State& s) { bench_attention(s, true, false); }
void BM_FlashForwardMmaSync(benchmark::State& s) { bench_attention(s, false, false); }
BENCHMARK(BM_FlashForwardWgmmaCausal)->Apply(wgmma_args);
BENCHMARK(BM_FlashForwardMmaSyncCausal)->Apply(wgmma_args);
BENCHMARK(BM_FlashForwardWgmma)->Apply(wgmma_args);
BENCHMARK(BM_FlashForwardMmaSync)->Apply(wgmma_args);

void t5_args(benchmark::internal::Benchmark* b, int64_t t) {
  for (int64_t drop : {0, 1, 2}) {
    for (int64_t rel : {0, 1}) b->Args({32, t, 12, 64, rel, drop});
  }
  b->Iterations(10)->UseManualTime()->Unit(benchmark::kMillisecond);
}
void BM_FlashT5Encoder(benchmark::State& s) { bench_attention(s, false, true, true); }
void BM_FlashT5EncoderForward(benchmark::State& s) { bench_attention(s, false, false, true); }
void BM_FlashT5Decoder(benchmark::State& s) { bench_attention(s, true, true, true); }
BENCHMARK(BM_FlashT5Encoder)->Apply([](auto* b) { t5_args(b, 512); });
BENCHMARK(BM_FlashT5EncoderForward)->Apply([](auto* b) { t5_args(b, 512); });
BENCHMARK(BM_FlashT5Decoder)->Apply([](auto* b) { t5_args(b, 114); });

}  // namespace
}  // namespace anvil

BENCHMARK_MAIN();
