// Training-step benchmark for GPT on one device: forward + backward + AdamW per step on random
// tokens, timed with CUDA events (manual time). Reports ms/step, tokens/s, model TFLOP/s and MFU
// against 989 TFLOP/s (H100/H200 dense bf16) with FLOPs/token = 6 N + 12 L d T, N = matmul
// parameters incl. the tied embedding (DESIGN.md §8) — the same formula bench/reference/
// gpt2_pytorch.py prints, so the two are comparable in one run. BERT-large (type bert, HF layout:
// post-LN, GELU-erf, MLM + binary heads, vocab 30522) runs the same step on full-length samples
// with 15% of the tokens as MLM targets (N includes the MLM head's dense layer) and HF's dropout
// 0.1 (attention probabilities, saved mask as bin/train's default, and hidden states).
// The model runs as bin/train's default ([train] attention_kernel = auto: the Hopper flash forward
// where it applies and is faster); rows named mma_sync_* force the mma.sync forward,
// regenerate_mask_* ([train] attention_dropout_mask = regenerate) redraw the dropout mask.
//   build/bench/gpt_step_bench --benchmark_filter=124M
#include <benchmark/benchmark.h>

#include <optional>
#include <random>
#include <vector>

#include "engine/arena.h"
#include "engine/cuda_graph.h"
#include "engine/device.h"
#include "engine/stream.h"
#include "model/stack/gpt.h"
#include "ops/step_scale.h"

namespace anvil {
namespace {

constexpr double kPeakFlops = 989e12;

struct BenchShape {
  int64_t layers, d, heads, batch, seq;
  bool bert = false;
  bool mma_sync = false;    // [train] attention_kernel = mma_sync (else auto)
  bool regenerate = false;  // [train] attention_dropout_mask = regenerate (else save)
  // graph: forward and backward replayed as one CUDA graph (the batch upload, grad norm read
  // and AdamW stay outside). sync_free: clipping on the device (ops/step_scale.h, AdamW reads
  // the scale), no host read in the step; with graph the whole step is one graph.
  bool graph = false;
  bool sync_free = false;
};

void gpt_step(benchmark::State& state, BenchShape shape) {
  if (engine::cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  model::GptConfig cfg;
  cfg.n_layers = shape.layers;
  cfg.d_model = shape.d;
  cfg.n_heads = shape.heads;
  cfg.max_seq_len = shape.seq;
  if (shape.bert) {
    cfg.causal = false;
    cfg.head = model::Head::kMlm;
    cfg.vocab_size = 30522;
    cfg.type_vocab_size = 2;
    cfg.binary_head = true;
    cfg.norm_placement = model::NormPlacement::kPost;
    cfg.activation = model::Activation::kGeluErf;
    cfg.embed_layernorm = true;
    cfg.ln_eps = 1e-12f;
    // HF's BertConfig defaults, which bench/reference/hf_bert.py trains with (and
    // configs/bert_large.ini): dropout 0.1 on the probabilities and the hidden states.
    cfg.hidden_dropout = cfg.attention_dropout = 0.1f;
  }
  const model::GptRunShape run{shape.batch, shape.seq};
  model::Precision prec{engine::Device::kCuda, engine::DType::kBF16, engine::DType::kF32};
  prec.attention = shape.mma_sync ? ops::AttentionKernel::kMmaSync : ops::AttentionKernel::kWgmma;
  prec.save_dropout_mask = !shape.regenerate;
  auto stream = engine::Stream::cuda(0);
  auto gpt = model::GptModel::create(cfg, run, prec, 1234);
  if (!stream.ok() || !gpt.ok()) {
    state.SkipWithError(
        std::string(gpt.ok() ? stream.status().message() : gpt.status().message()).c_str());
    return;
  }
  auto start = engine::Event::create();
  auto stop = engine::Event::create();
  const int64_t n = shape.batch * shape.seq;
  std::vector<int32_t> tokens(n), targets(n), positions(n), types(n);
  std::vector<int32_t> lengths(shape.batch, static_cast<int32_t>(shape.seq));
  std::vector<int32_t> labels(shape.batch);
  std::mt19937 rng(7);
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    positions[i] = static_cast<int32_t>(i % shape.seq);
    types[i] = i % shape.seq >= shape.seq / 2 ? 1 : 0;
    if (shape.bert && rng() % 100 >= 15) targets[i] = -1;  // BERT: 15% masked targets
    counted += targets[i] >= 0;
  }
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % 2);
  model::GptBatch batch{tokens.data(), positions.data(), targets.data(), nullptr};
  if (shape.bert) {
    batch.token_types = types.data();
    batch.lengths = lengths.data();
    batch.binary_labels = labels.data();
  }
  model::GptModel& m = **gpt;
  int64_t step = 0;
  auto forward_backward = [&] {
    m.zero_grads(*stream);
    m.forward_chunk(0, 0, true, 0, *stream);
    m.backward(1.0f / static_cast<float>(counted), *stream);
  };
  auto scalars = engine::Arena::create(engine::Device::kCuda, 256, "step scale");
  if (!scalars.ok()) {
    state.SkipWithError(std::string(scalars.status().message()).c_str());
    return;
  }
  const engine::TensorView step_scale = *scalars->allocate(engine::DType::kF32, {3}, "scale");
  // The optimizer with clipping to norm 1: on the device, or from the host-read norm.
  auto clip_and_update = [&](int64_t t) {
    model::OptimizerStep o{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, t};
    if (shape.sync_free) {
      ops::step_scale({1.0, 1.0}, step_scale, m.grad_sum_squares_device(*stream), *stream);
      o.device_scale = step_scale;
    } else {
      const double norm = m.grad_norm(*stream);  // the host read bin/train's step has today
      o.grad_scale = norm > 1.0 ? static_cast<float>(1.0 / norm) : 1.0f;
    }
    m.optimizer_step(o, *stream);
  };
  std::optional<engine::CudaGraph> graph;
  auto train_step = [&] {
    m.set_batch(0, 0, batch, *stream);
    if (graph) {
      graph->launch(*stream);
    } else {
      forward_backward();
    }
    clip_and_update(++step);
  };
  for (int i = 0; i < 3; ++i) train_step();
  if (shape.graph) {
    auto g = engine::CudaGraph::capture(*stream, forward_backward);
    if (!g.ok()) {
      state.SkipWithError(std::string(g.status().message()).c_str());
      return;
    }
    graph = std::move(*g);
    state.counters["graph_nodes"] = static_cast<double>(graph->nodes());
    for (int i = 0; i < 2; ++i) train_step();
  }
  for (auto _ : state) {
    start->record(*stream);
    train_step();
    stop->record(*stream);
    state.SetIterationTime(stop->elapsed_ms_since(*start) / 1e3);
  }
  const double flops_per_token =
      6.0 * cfg.matmul_params() + 12.0 * cfg.n_layers * cfg.d_model * shape.seq;
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP/s"] =
      benchmark::Counter(flops_per_token * n / 1e12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MFU%"] = benchmark::Counter(flops_per_token * n / kPeakFlops * 100,
                                              benchmark::Counter::kIsIterationInvariantRate);
  size_t free_b = 0, total_b = 0;
  engine::cuda_memory_info(&free_b, &total_b);
  state.counters["GiB"] = static_cast<double>(total_b - free_b) / (1u << 30);
}

BENCHMARK_CAPTURE(gpt_step, 124M_B32_T1024, BenchShape{12, 768, 12, 32, 1024})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(gpt_step, 350M_B16_T1024, BenchShape{24, 1024, 16, 16, 1024})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
// GPT 1.3B (24 layers, d 2048, 16 heads of 128), the whole 16 x 2048 batch in one micro-batch.
BENCHMARK_CAPTURE(gpt_step, 1p3B_B16_T2048, BenchShape{24, 2048, 16, 16, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(gpt_step, mma_sync_1p3B_B16_T2048,
                  BenchShape{24, 2048, 16, 16, 2048, false, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
// BERT-large (24 layers, d 1024, 16 heads of 64), 32 x 512 (HF eager: 147K tokens/s on an H200).
BENCHMARK_CAPTURE(gpt_step, BERT_large_B32_T512, BenchShape{24, 1024, 16, 32, 512, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

BENCHMARK_CAPTURE(gpt_step, mma_sync_BERT_large_B32_T512,
                  BenchShape{24, 1024, 16, 32, 512, true, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
// The same with the attention dropout mask drawn again in backward instead of saved.
BENCHMARK_CAPTURE(gpt_step, regenerate_mask_BERT_large_B32_T512,
                  BenchShape{24, 1024, 16, 32, 512, true, false, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
// What replaying forward + backward as one CUDA graph, and clipping on the device (no host read
// in the step), save of the step's launch and sync gaps.
BENCHMARK_CAPTURE(gpt_step, graph_124M_B32_T1024,
                  BenchShape{12, 768, 12, 32, 1024, false, false, false, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(gpt_step, sync_free_124M_B32_T1024,
                  BenchShape{12, 768, 12, 32, 1024, false, false, false, false, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(gpt_step, graph_sync_free_124M_B32_T1024,
                  BenchShape{12, 768, 12, 32, 1024, false, false, false, true, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(gpt_step, graph_350M_B16_T1024,
                  BenchShape{24, 1024, 16, 16, 1024, false, false, false, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(gpt_step, graph_BERT_large_B32_T512,
                  BenchShape{24, 1024, 16, 32, 512, true, false, false, true})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

}  // namespace
}  // namespace anvil

BENCHMARK_MAIN();
