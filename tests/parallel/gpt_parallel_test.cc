// Tensor, pipeline and data parallelism combined, end to end on the CPU: a tiny GPT (8 layers,
// dropout on) trained for 3 steps under every layout that fits the launched world (mpirun np 1,
// 2, 4, 8): ZeRO over one rank, TP2 (also with sequence parallelism), PP2, PP4 interleaved, DP2,
// TP2xPP2, TP2xDP2, PP2xDP2, TP2xPP2xDP2, ZeRO 1, 2 and 3 with DP2, DP4 and TP2xPP2xDP2, and
// activation recomputation. Every rank also trains the single-rank reference itself (no
// communication), then compares the losses and gradient norms of the 3 steps and its own
// parameters, element by element, with the reference parameters at the same global elements
// (model/param_table.h: tp_global_index; pipeline stages hold whole layers). The dropout masks
// agree too: hidden dropout numbers by micro-batch and layer, attention dropout by global head.
//
// On GPUs (ANVIL_PARALLEL_GPU=1, one GPU per rank: scripts/gpu/multi_gpu.sh) the same layouts run
// in bf16 through NCCL against the single-rank GPU run; bf16 rounding of the partial sums and the
// embedding backward's atomics make the runs differ slightly: losses within 1e-2 relative, norms
// 5e-2, parameters 2e-2 absolute (2 lr).
//
// Tolerances. f64: every layout computes the same sums in another order (TP partial sums, DP
// and micro-batch accumulation): losses and norms relative 1e-11, parameters 1e-11 absolute.
// f32: relative 1e-5 and 2e-4 absolute (lr / 50; see dp_training_test.cc for why AdamW can
// amplify rounding noise to a fraction of lr; observed: 9.6e-5 with TP2, below 4e-5 otherwise).
// Recomputation without other parallelism must be bitwise identical to the run that keeps the
// activations.
// The BLOOM-style (ALiBi, embedding LayerNorm), LLaMA-style (RMSNorm, SwiGLU, rotary, no
// biases, untied LM head), BERT (post-LN, MLM + binary heads), prefix-LM and packed T0/MTF
// variants run a subset of the layouts; on GPUs with d_model 128 and 2 heads (flash attention
// needs head_dim 64 or 128 in bf16).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/arena.h"
#include "engine/device.h"
#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/mtf_packing.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/mtf_batch.h"
#include "model/train/trainer.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/tiny_training.h"
#include "tests/parallel/world_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

// The shared tiny GPT with 8 layers (PP4 interleaved needs 8 chunks) and a padded vocabulary
// divisible by every tp used here (the same in the reference).
TrainConfig tiny_config() {
  TrainConfig c = testing_parallel::tiny_train_config();
  c.model.padded_vocab = 256;
  c.model.n_layers = 8;
  return c;
}

// Packed T0/MTF record i (model/train/mtf_batch.h), depending on i only: pairs of 1-5 input
// and 1-4 target tokens in [0, vocab) packed into T + 1 tokens as io/mtf_packing packs them,
// padded with pad.
SampleFn hashed_mtf_samples(int64_t seq_len, int64_t vocab, int32_t pad) {
  return [seq_len, vocab, pad](int64_t index, int32_t* out) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 3);
    auto next = [&x](uint64_t n) {
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      return static_cast<int32_t>(x % n);
    };
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
    int64_t used = 0;
    while (true) {
      const int64_t ni = 1 + next(5), nt = 1 + next(4);
      if (used + ni + nt > seq_len + 1) break;
      pairs.emplace_back();
      for (int64_t t = 0; t < ni; ++t) pairs.back().first.push_back(next(vocab));
      for (int64_t t = 0; t < nt; ++t) pairs.back().second.push_back(next(vocab));
      used += ni + nt;
    }
    auto row = io::pack_mtf_row(pairs, seq_len + 1, pad);
    ANVIL_CHECK_OK(row.status());
    const MtfRecord r = mtf_record(out, seq_len);
    for (int64_t t = 0; t <= seq_len; ++t) {
      r.tokens[t] = row->tokens[static_cast<size_t>(t)];
      r.segment_ids[t] = row->segment_ids[static_cast<size_t>(t)];
      r.is_inputs[t] = row->is_inputs[static_cast<size_t>(t)];
    }
  };
}

SampleFn samples(const TrainConfig& c) {
  const GptConfig& m = c.model;
  if (c.data.mtf) {
    return hashed_mtf_samples(c.data.seq_len, m.vocab_size, static_cast<int32_t>(c.data.pad_token));
  }
  return c.family == "bert" ? testing_parallel::hashed_bert_samples(c.data.seq_len, m.vocab_size)
                            : testing_parallel::hashed_samples(c.data.seq_len, m.vocab_size);
}

struct Layout {
  int tp = 1, pp = 1, dp = 1, virtual_stages = 1, zero_stage = 0;
  std::string recompute = "none";
  bool sequence_parallel = false;
  int world() const { return tp * pp * dp; }
  std::string name() const {
    return absl::StrFormat("tp%d%s pp%d%s dp%d zero%d recompute %s", tp,
                           sequence_parallel ? " sp" : "", pp,
                           virtual_stages > 1 ? absl::StrFormat("x%d", virtual_stages) : "", dp,
                           zero_stage, recompute);
  }
};

struct RunResult {
  std::unique_ptr<Trainer> trainer;
  std::vector<double> losses, norms;
  std::vector<double> sop;  // BERT's sop loss part (NaN for GPT)
};

// CPU in dt, or (dt == kBF16) the GPU with bf16 activations and f32 master weights.
Precision precision(engine::DType dt) {
  if (dt == engine::DType::kBF16) {
    return Precision{engine::Device::kCuda, engine::DType::kBF16, engine::DType::kF32};
  }
  return Precision{engine::Device::kCpu, dt, dt};
}

RunResult train(const TrainConfig& cfg, engine::DType dt, const TrainerParallel& par) {
  RunResult r;
  auto t = Trainer::create(cfg, precision(dt), samples(cfg), {}, engine::LogContext{}, par);
  ANVIL_CHECK_OK(t.status());
  r.trainer = std::move(*t);
  for (int i = 0; i < cfg.train.steps; ++i) {
    const StepStats st = r.trainer->step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
    r.sop.push_back(st.parts.sop);
  }
  return r;
}

// Every parameter value the model holds a part of, by flat offset (ZeRO-3 gathers: collective).
std::vector<double> values(Trainer& t) {
  GptModel& m = gpt_model(t.model());
  const FlatBuffers fb = m.flat_buffers();
  auto arena = engine::Arena::create(fb.value.device,
                                     engine::arena_bytes(fb.value.dtype, {m.params().flat_numel()}),
                                     "test gather");
  ANVIL_CHECK_OK(arena.status());
  auto out = arena->allocate(fb.value.dtype, {m.params().flat_numel()}, "values");
  ANVIL_CHECK_OK(out.status());
  m.gather_values(*out, t.stream());
  t.stream().synchronize();
  return testing::to_host_f64(*out);
}

// max |local - reference| over this rank's parameter elements (by global element).
double max_param_diff(Trainer& local, Trainer& ref, int tp, int tp_rank, int64_t* compared) {
  double worst = 0.0;
  const std::vector<double> mine = values(local), theirs = values(ref);
  for (const Param& p : local.model().params().all()) {
    const Param* r = ref.model().params().find(p.name);
    EXPECT_NE(r, nullptr) << p.name;
    if (r == nullptr) continue;
    for (int64_t i = 0; i < p.numel(); ++i) {
      const int64_t g = tp_global_index(p, i, tp, tp_rank);
      const double d =
          mine[static_cast<size_t>(p.offset + i)] - theirs[static_cast<size_t>(r->offset + g)];
      worst = std::max(worst, std::abs(d));
      ++*compared;
    }
  }
  return worst;
}

std::vector<Layout> all_layouts() {
  return {
      {1, 1, 1, 1, 0, "selective"},
      {1, 1, 1, 1, 0, "full"},
      {1, 1, 1, 1, 1},  // ZeRO over a DP group of one (reduce_single_rank): the NCCL path on 1 GPU
      {1, 1, 1, 1, 3},
      {2, 1, 1},
      {1, 2, 1},
      {1, 1, 2},
      {2, 1, 1, 1, 0, "full"},
      {2, 1, 1, 1, 0, "none", true},
      {2, 1, 1, 1, 0, "full", true},
      {1, 2, 1, 1, 0, "selective"},
      {1, 2, 1, 2},  // interleaved
      {2, 2, 1},
      {2, 1, 2},
      {1, 2, 2},
      {1, 4, 1, 2},  // PP4 interleaved
      {1, 1, 4, 1, 1},
      {1, 1, 2, 1, 1},
      {1, 1, 2, 1, 2},
      {1, 1, 2, 1, 3},
      {1, 1, 4, 1, 2},
      {1, 1, 4, 1, 3},
      {1, 1, 2, 1, 3, "full"},
      {2, 2, 1, 1, 0, "full"},
      {2, 2, 1, 1, 0, "none", true},
      {2, 1, 2, 1, 0, "none", true},
      {2, 1, 2, 1, 2, "none", true},
      {2, 1, 2, 1, 1},
      {1, 2, 2, 1, 1},
      {2, 2, 2},
      {2, 2, 2, 1, 1},
      {2, 2, 2, 1, 2},
      {2, 2, 2, 1, 3},
      {2, 2, 2, 1, 1, "selective", true},
      {2, 2, 2, 1, 3, "none", true},
      {1, 2, 4, 2, 3},
      {1, 4, 2, 2},
      {2, 4, 1},
  };
}

// The architecture variants (docs/models.md) under each kind of parallelism: TP2 (heads, and
// with ALiBi their slopes, split over ranks; also with sequence parallelism), PP2 (the untied
// LM head on the last stage only), DP2 with ZeRO-3, recomputation, and mixes on 4 and 8 ranks.
std::vector<Layout> variant_layouts() {
  return {
      {1, 1, 1, 1, 0, "full"},
      {2, 1, 1},
      {2, 1, 1, 1, 0, "full", true},
      {1, 2, 1},
      {1, 1, 2, 1, 3},
      {1, 1, 2, 1, 1},
      {2, 2, 1, 1, 0, "selective", true},
      {2, 1, 2, 1, 2, "none", true},
      {1, 2, 2, 1, 3},
      {2, 2, 2, 1, 3, "none", true},
  };
}

std::vector<Layout> layouts_for(const std::vector<Layout>& all, int world) {
  std::vector<Layout> out;
  for (const Layout& l : all) {
    if (l.world() == world) out.push_back(l);
  }
  return out;
}

struct Tolerance {
  double loss_rel, norm_rel, param_abs;
  bool exact_single_rank;  // recomputation alone must be bitwise equal
};

void check_layouts(const TrainConfig& base, const std::vector<Layout>& candidates, engine::DType dt,
                   const Tolerance& tol) {
  const bool f64 = dt == engine::DType::kF64;
  const char* label = f64 ? "f64" : dt == engine::DType::kF32 ? "f32" : "gpu bf16";
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<Layout> layouts = layouts_for(candidates, world);
  if (layouts.empty()) GTEST_SKIP() << "no layout of " << world << " ranks";
  RunResult ref = train(base, dt, TrainerParallel{});
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name());
    TrainConfig cfg = base;
    cfg.parallel.tp = l.tp;
    cfg.parallel.pp = l.pp;
    cfg.parallel.dp = l.dp;
    cfg.parallel.virtual_stages = l.virtual_stages;
    cfg.parallel.zero_stage = l.zero_stage;
    cfg.parallel.recompute = l.recompute;
    cfg.parallel.sequence_parallel = l.sequence_parallel;
    cfg.parallel.reduce_single_rank = l.zero_stage > 0 && l.dp == 1;
    cfg.parallel.bucket_mb = 0.01;
    cfg.parallel.timeout_s = 120;
    auto lc = parallel::testing::layout_comms(l.tp, l.pp, l.dp);
    ASSERT_TRUE(lc.ok()) << lc.status();
    TrainerParallel par;
    par.grid = &(*lc)->grid;
    par.comms = &(*lc)->comms;
    par.local_rank = rank;
    RunResult run = train(cfg, dt, par);
    ASSERT_EQ(run.losses.size(), ref.losses.size());
    // Recomputation alone: the same ops in the same order (ZeRO over one rank: equal in f64,
    // f32 rounding apart in f32).
    const bool exact = world == 1 && l.zero_stage == 0 && tol.exact_single_rank;
    for (size_t i = 0; i < ref.losses.size(); ++i) {
      if (exact) {
        EXPECT_EQ(run.losses[i], ref.losses[i]) << "step " << i;
        EXPECT_EQ(run.norms[i], ref.norms[i]) << "step " << i;
      }
      EXPECT_NEAR(run.losses[i], ref.losses[i], tol.loss_rel * std::abs(ref.losses[i]))
          << "step " << i;
      EXPECT_NEAR(run.norms[i], ref.norms[i], tol.norm_rel * ref.norms[i]) << "step " << i;
      // BERT: the binary head's part, reduced over PP and DP like the loss.
      if (cfg.family == "bert") {
        EXPECT_NEAR(run.sop[i], ref.sop[i], tol.loss_rel * ref.sop[i]) << "sop, step " << i;
      }
    }
    // ZeRO plans AdamW's moments (1), the gradients (2) and the parameters (3) for the own
    // pieces (plus one or two layers of scratch and the embedding / final-LN buckets).
    auto bytes = [](RunResult& r, const char* category) {
      return gpt_model(r.trainer->model()).arena_bytes(category);
    };
    if (l.zero_stage >= 1 && l.tp == 1 && l.pp == 1 && l.dp > 1) {
      // Buckets are padded to dp * 64 elements: at most that much per bucket on top.
      EXPECT_LE(bytes(run, "optimizer"),
                bytes(ref, "optimizer") / l.dp + 2 * 4 * 64 * 11 * static_cast<size_t>(l.dp))
          << "optimizer bytes per rank";
    }
    if (l.dp > 1) {  // a DP group of one shards nothing
      // Each category of this rank's plan against the single-rank plan, from its ZeRO stage on.
      const char* sharded[] = {"optimizer", "grads", "params"};
      for (int stage = 1; stage <= l.zero_stage; ++stage) {
        const char* category = sharded[stage - 1];
        EXPECT_LT(bytes(run, category), bytes(ref, category)) << category;
      }
    }
    int64_t compared = 0;
    const double diff =
        max_param_diff(*run.trainer, *ref.trainer, l.tp, (*lc)->grid.tp_rank(), &compared);
    EXPECT_GT(compared, 0);
    if (exact) {
      EXPECT_EQ(diff, 0.0);
    } else {
      EXPECT_LE(diff, tol.param_abs);
    }
    // Gather the worst difference for the log line.
    double worst = diff;
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("%s %s: losses %.6f %.6f %.6f, max |param - ref| %.3g\n", label, l.name().c_str(),
                  run.losses[0], run.losses[1], run.losses[2], worst);
    }
  }
  // The parameters moved: the comparison is not between two untouched inits.
  TrainConfig c0 = base;
  c0.train.steps = 0;
  RunResult init = train(c0, dt, TrainerParallel{});
  int64_t n = 0;
  EXPECT_GT(max_param_diff(*ref.trainer, *init.trainer, 1, 0, &n), 1e-3);
}

class GptParallelTest : public ::testing::TestWithParam<engine::DType> {};

TEST_P(GptParallelTest, EveryLayoutEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  check_layouts(tiny_config(), all_layouts(), GetParam(),
                f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
}

// BLOOM-style: ALiBi, the embedding LayerNorm, GELU, LayerNorm, biases, tied LM head.
TrainConfig bloom_config() {
  TrainConfig c = tiny_config();
  c.model.position_embedding = PositionEmbedding::kAlibi;
  c.model.embed_layernorm = true;
  return c;
}

// LLaMA-style: RMSNorm, SwiGLU, rotary, no biases, untied LM head.
TrainConfig llama_config() {
  TrainConfig c = tiny_config();
  c.model.norm = Norm::kRmsNorm;
  c.model.activation = Activation::kSwiglu;
  c.model.position_embedding = PositionEmbedding::kRotary;
  c.model.bias = false;
  c.model.tie_embeddings = false;
  c.model.ffn_hidden = 96;
  return c;
}

TEST_P(GptParallelTest, BloomStyleEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  check_layouts(bloom_config(), variant_layouts(), GetParam(),
                f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
}

TEST_P(GptParallelTest, LlamaStyleEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  check_layouts(llama_config(), variant_layouts(), GetParam(),
                f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
}

// [model] vocab_padding_in_loss: the vocab-parallel cross-entropy over all padded columns (the
// padding fixed at 128 rows so every layout has the same softmax), tied and untied heads.
TEST_P(GptParallelTest, VocabPaddingInLossEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  for (TrainConfig c : {bloom_config(), llama_config()}) {
    c.model.vocab_padding_in_loss = true;
    c.model.padded_vocab = 128;
    check_layouts(c, variant_layouts(), GetParam(),
                  f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
  }
}

// Grouped-query attention (n_kv_heads 2 of 4 heads, Megatron's grouped c_attn rows): TP2
// gives each rank one query group (two query heads and their kv head).
TEST_P(GptParallelTest, GroupedQueryLlamaStyleEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  TrainConfig c = llama_config();
  c.model.n_kv_heads = 2;
  check_layouts(c, variant_layouts(), GetParam(),
                f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
}

// Qwen2-style: grouped-query attention with a bias on c_attn alone (split with c_attn's group
// rows) and llama3 rope scaling.
TEST_P(GptParallelTest, QwenStyleQkvBiasEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  TrainConfig c = llama_config();
  c.model.n_kv_heads = 2;
  c.model.qkv_bias = true;
  c.model.rope_scaling.type = ops::RotaryScalingType::kLlama3;
  c.model.rope_scaling.factor = 4.0f;
  c.model.rope_scaling.original_max_position = 16;
  check_layouts(c, variant_layouts(), GetParam(),
                f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
}

// BERT (type bert, HF layout): post-LN, GELU-erf, token types and the embedding LayerNorm,
// bidirectional attention with padding, the MLM head (vocab-parallel bias) and the binary head.
TrainConfig bert_config() {
  TrainConfig c = tiny_config();
  testing_parallel::use_hf_bert(c);
  return c;
}

// Megatron's BERT layout: pre-LN with ln_f, tanh GELU, no embedding LayerNorm.
TrainConfig bert_pre_ln_config() {
  TrainConfig c = bert_config();
  c.model.norm_placement = NormPlacement::kPre;
  c.model.activation = Activation::kGelu;
  c.model.embed_layernorm = false;
  return c;
}

TEST_P(GptParallelTest, BertEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  for (const TrainConfig& c : {bert_config(), bert_pre_ln_config()}) {
    SCOPED_TRACE(c.model.post_ln() ? "bert post-LN" : "bert pre-LN");
    check_layouts(c, variant_layouts(), GetParam(),
                  f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
  }
}

// Prefix-LM ([data] prefix_lm, loss_on_targets_only): every rank draws the same prefixes (per
// sample, from the sample index), the prefix ends reach every stage's attention, and the
// loss is divided as the fork's GPTModelPipe divides it; per row, and per document with
// reset_attention_mask (eod 3: a few documents per sample); then per row with the position
// weights in the (vocab-parallel) cross-entropy, divided by each micro-batch's weight sum.
TEST_P(GptParallelTest, PrefixLmEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  for (const int variant : {0, 1, 2}) {
    SCOPED_TRACE(variant == 0 ? "per row" : variant == 1 ? "per document" : "reweighted");
    TrainConfig c = tiny_config();
    c.data.prefix_lm = true;
    c.data.loss_on_targets_only = true;
    c.data.reset_attention_mask = variant == 1;
    c.data.reweight_loss = variant == 2;
    if (variant == 2) c.data.prefix_lm_normalizer = DataConfig::PrefixLmNormalizer::kMaskSum;
    c.data.eod_token = 3;
    check_layouts(c, variant_layouts(), GetParam(),
                  f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
  }
}

// Packed T0/MTF rows ([data] mtf, ALiBi): the segment ids and per-pair prefix ends reach
// every stage's attention, the loss is each micro-batch's mean over the targets.
TEST_P(GptParallelTest, MtfEqualsOneRank) {
  const bool f64 = GetParam() == engine::DType::kF64;
  TrainConfig c = tiny_config();
  c.model.position_embedding = PositionEmbedding::kAlibi;
  c.data.mtf = true;
  c.data.pad_token = 3;
  check_layouts(c, variant_layouts(), GetParam(),
                f64 ? Tolerance{1e-11, 1e-11, 1e-11, true} : Tolerance{1e-5, 1e-5, 2e-4, true});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GptParallelTest,
                         ::testing::Values(engine::DType::kF64, engine::DType::kF32));

// The same layouts through NCCL, one GPU per rank (scripts/gpu/multi_gpu.sh sets the variable).
TEST(GptParallelGpuTest, EveryLayoutEqualsOneRankThroughNccl) {
  const char* on = std::getenv("ANVIL_PARALLEL_GPU");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set ANVIL_PARALLEL_GPU=1";
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (engine::cuda_device_count() < world) {
    GTEST_SKIP() << world << " ranks need as many GPUs, have " << engine::cuda_device_count();
  }
  check_layouts(tiny_config(), all_layouts(), engine::DType::kBF16,
                Tolerance{1e-2, 5e-2, 2e-2, false});
}

// The BLOOM-, LLaMA-style and BERT variants through NCCL: 2 heads of 64 (flash attention, which
// ALiBi, rotary and BERT's padding mask need in bf16), so TP2 gives each rank one head.
TEST(GptParallelGpuTest, VariantsEqualOneRankThroughNccl) {
  const char* on = std::getenv("ANVIL_PARALLEL_GPU");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set ANVIL_PARALLEL_GPU=1";
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (engine::cuda_device_count() < world) {
    GTEST_SKIP() << world << " ranks need as many GPUs, have " << engine::cuda_device_count();
  }
  for (TrainConfig c : {bloom_config(), llama_config(), bert_config()}) {
    SCOPED_TRACE(c.family == "bert"       ? "bert"
                 : c.model.tie_embeddings ? "bloom-style"
                                          : "llama-style");
    c.model.d_model = 128;
    c.model.n_heads = 2;
    check_layouts(c, variant_layouts(), engine::DType::kBF16, Tolerance{1e-2, 5e-2, 2e-2, false});
  }
}

}  // namespace
}  // namespace anvil::model
