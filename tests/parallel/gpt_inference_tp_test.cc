// Tensor-parallel inference (model/infer/gpt_inference.h with GptShard tp = world) under mpirun on
// the CPU (np 1, 2, 4): from the same master weights, every TP rank's logits equal the single-rank
// model's (f32 rounding: the row-parallel sums are reordered), for prefill of three prompts of
// different lengths and eight decode steps with forced tokens (some steps decoding only some
// slots), and greedy and sampled generation gives the single-rank tokens on every rank.
// With a GPU per rank, the same on CUDA in bf16 over NCCL (logits to bf16 tolerance; skipped
// with fewer GPUs than ranks).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/infer/generation.h"
#include "model/infer/gpt_inference.h"
#include "model/stack/gpt.h"
#include "model/train/checkpoint.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "parallel/nccl_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

constexpr int64_t kVocab = 50;  // padded to 128: divisible by tp 1, 2, 4

GptConfig tiny_config() {
  GptConfig c;
  c.vocab_size = kVocab;
  c.max_seq_len = 24;
  c.d_model = 64;
  c.n_heads = 4;
  c.n_layers = 2;
  c.init_std = 0.1f;
  return c;
}

// The master tensors of a freshly initialized model (the same on every rank: they depend on the
// seed only), as a lookup.
struct Weights {
  std::map<std::string, engine::HostSlice> w;
  TensorLookup lookup() const {
    return [this](const std::string& name) -> absl::StatusOr<engine::HostSlice> {
      auto it = w.find(name);
      if (it == w.end()) return absl::NotFoundError(name);
      return it->second;
    };
  }
};

Weights initial_weights(const GptConfig& cfg) {
  engine::Stream s = engine::Stream::cpu();
  auto init = GptModel::create(cfg, GptRunShape{1, 8}, {Device::kCpu, DType::kF32, DType::kF32}, 5);
  EXPECT_TRUE(init.ok()) << init.status();
  Weights out;
  for (engine::HostSlice& t : gpt_checkpoint_slices(**init, 0, s)) out.w[t.tensor] = std::move(t);
  return out;
}

// Prefill of three prompts and eight decode steps: the TP model's logits against one rank's.
void compare_logits(GptInference& one, GptInference& tp, const testing::Tol& tol,
                    engine::Stream& s) {
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t len : {3, 7, 5}) prompts.push_back(testing::random_ints(len, 10 + len, 0, kVocab));
  std::vector<float> a, b;
  ASSERT_TRUE(one.prefill({0, 1, 2}, prompts, &a, s).ok());
  ASSERT_TRUE(tp.prefill({0, 1, 2}, prompts, &b, s).ok());
  EXPECT_TRUE(testing::tensors_near(b, a, tol)) << "prefill";
  for (int step = 0; step < 8; ++step) {
    const std::vector<int64_t> slots =
        step % 3 == 1 ? std::vector<int64_t>{2, 0} : std::vector<int64_t>{0, 1, 2};
    const std::vector<int32_t> forced = testing::random_ints(slots.size(), 30 + step, 0, kVocab);
    ASSERT_TRUE(one.decode(slots, forced, &a, s).ok());
    ASSERT_TRUE(tp.decode(slots, forced, &b, s).ok());
    EXPECT_TRUE(testing::tensors_near(b, a, tol)) << "decode step " << step;
  }
}

TEST(GptInferenceTp, EqualsSingleRank) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto grid = parallel::ProcessGrid::create(world, rank, world, 1, 1);
  ASSERT_TRUE(grid.ok()) << grid.status();
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*grid, opt);
  ASSERT_TRUE(comms.ok()) << comms.status();
  engine::Stream s = engine::Stream::cpu();
  const Precision prec{Device::kCpu, DType::kF32, DType::kF32};
  const Weights w = initial_weights(tiny_config());
  const TensorLookup lookup = w.lookup();
  GptShard shard;
  shard.tp = world;
  shard.tp_rank = rank;
  shard.tp_comm = comms->tp.get();
  auto one = GptInference::create(tiny_config(), {3, 0}, prec);
  auto tp = GptInference::create(tiny_config(), {3, 0}, prec, shard);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(tp.ok()) << tp.status();
  ASSERT_TRUE((*one)->load(lookup, s).ok());
  ASSERT_TRUE((*tp)->load(lookup, s).ok());

  compare_logits(**one, **tp, testing::Tol{1e-5, 1e-5, 1e-10}, s);

  std::vector<GenerationRequest> rs(2);
  rs[0].prompt = testing::random_ints(7, 17, 0, kVocab);
  rs[0].sampling.greedy = true;
  rs[0].max_new_tokens = 10;
  rs[1].prompt = testing::random_ints(3, 13, 0, kVocab);
  rs[1].sampling.seed = 9;
  rs[1].sampling.top_k = 10;
  rs[1].max_new_tokens = 12;
  std::vector<std::vector<int32_t>> ta, tb;
  Generator ga(**one, -1, nullptr), gb(**tp, -1, nullptr);
  ASSERT_TRUE(generate_all(ga, rs, &ta, s).ok());
  ASSERT_TRUE(generate_all(gb, rs, &tb, s).ok());
  EXPECT_EQ(ta, tb);
}

// Grouped-query attention (8 heads on 4 kv heads: every TP rank holds whole groups) with a
// Qwen2-style bias on c_attn alone (given nonzero values) and llama3 rope scaling.
TEST(GptInferenceTp, GroupedQueryEqualsSingleRank) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (4 % world != 0) GTEST_SKIP() << "4 kv heads over " << world << " ranks";
  auto grid = parallel::ProcessGrid::create(world, rank, world, 1, 1);
  ASSERT_TRUE(grid.ok()) << grid.status();
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*grid, opt);
  ASSERT_TRUE(comms.ok()) << comms.status();
  engine::Stream s = engine::Stream::cpu();
  const Precision prec{Device::kCpu, DType::kF32, DType::kF32};
  GptConfig cfg = tiny_config();
  cfg.n_heads = 8;
  cfg.n_kv_heads = 4;
  cfg.position_embedding = PositionEmbedding::kRotary;
  cfg.activation = Activation::kSwiglu;
  cfg.norm = Norm::kRmsNorm;
  cfg.bias = false;
  cfg.qkv_bias = true;
  cfg.tie_embeddings = false;
  cfg.rope_scaling.type = ops::RotaryScalingType::kLlama3;
  cfg.rope_scaling.factor = 4.0f;
  cfg.rope_scaling.original_max_position = 16;
  Weights w = initial_weights(cfg);
  for (auto& [name, t] : w.w) {
    if (name.find("attn.c_attn.bias") == std::string::npos) continue;
    t.data = testing::random_uniform(static_cast<int64_t>(t.data.size()), 41);
  }
  GptShard shard;
  shard.tp = world;
  shard.tp_rank = rank;
  shard.tp_comm = comms->tp.get();
  auto one = GptInference::create(cfg, {3, 0}, prec);
  auto tp = GptInference::create(cfg, {3, 0}, prec, shard);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(tp.ok()) << tp.status();
  ASSERT_TRUE((*one)->load(w.lookup(), s).ok());
  ASSERT_TRUE((*tp)->load(w.lookup(), s).ok());
  compare_logits(**one, **tp, testing::Tol{1e-5, 1e-5, 1e-10}, s);
}

TEST(GptInferenceTp, CudaEqualsSingleRank) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (engine::cuda_device_count() < world) {
    GTEST_SKIP() << world << " ranks need as many GPUs, have " << engine::cuda_device_count();
  }
  ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
  auto grid = parallel::ProcessGrid::create(world, rank, world, 1, 1);
  ASSERT_TRUE(grid.ok()) << grid.status();
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*grid, opt);
  ASSERT_TRUE(comms.ok()) << comms.status();
  auto nccl = parallel::NcclComm::create(grid->tp_group(), rank, comms->tp.get(), opt);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  GptConfig cfg = tiny_config();
  cfg.d_model = 256;  // head_dim 64: what the CUDA flash attention takes
  const Weights w = initial_weights(cfg);
  testing::TestStream s(Device::kCuda);
  const Precision prec{Device::kCuda, DType::kBF16, DType::kF32};
  GptShard shard;
  shard.tp = world;
  shard.tp_rank = rank;
  shard.tp_comm = nccl->get();
  auto one = GptInference::create(cfg, {3, 0}, prec);
  auto tp = GptInference::create(cfg, {3, 0}, prec, shard);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(tp.ok()) << tp.status();
  ASSERT_TRUE((*one)->load(w.lookup(), s).ok());
  ASSERT_TRUE((*tp)->load(w.lookup(), s).ok());
  // bf16 activations rounded after partial sums in another order.
  compare_logits(**one, **tp, testing::Tol{6e-2, 5e-2, 2e-3}, s);
  s.get().synchronize();
}

}  // namespace
}  // namespace anvil::model
