// The trainer (model/train/trainer.h) running T5 under every parallel layout of the world size
// against the single-rank trainer on the same global batches: 3 steps of a tiny T5 (cosine-decayed
// AdamW, clipping, 4 micro-batches per step on one rank), comparing the logged losses and gradient
// norms of every step and, by global element, this rank's parameters afterwards.
//  - CPU in double (mpirun np 1, 2, 4, 8): PP2, PP2 x DP2, PP4 (split 2 and split 1), TP2 x PP2,
//    TP2 x PP2 x DP2 (dropout on without TP; off with TP, whose FFN-hidden masks are numbered
//    per TP slice); sequence parallelism with TP2 (+ full recompute), TP2 x PP2 (+ full
//    recompute) and TP2 x PP2 x DP2. Within 1e-9 relative, or 1e-5 where a stack spans several
//    stages (each stage rounds its part of a relative table's gradient to f32 before the sum: see
//    t5_pipeline_test.cc).
//  - GPUs through NCCL (ANVIL_PARALLEL_GPU=1, one GPU per rank): the same layouts in bf16 against
//    the single-GPU trainer, losses and norms within 2e-2 relative.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/device.h"
#include "gtest/gtest.h"
#include "model/t5/t5_train_model.h"
#include "model/train/trainer.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/tiny_t5_training.h"
#include "tests/parallel/world_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

constexpr int64_t kTe = 12, kTd = 6, kVocab = 61;

// d_kv 64: the GPU's flash attention takes 64 or 128.
TrainConfig tiny_t5_config(float dropout) {
  TrainConfig c;
  c.family = "t5";
  c.model.vocab_size = kVocab;
  T5Config& t = t5_config(c);
  t.vocab_size = kVocab;
  t.d_model = 64;
  t.d_kv = 64;
  t.n_heads = 2;
  t.d_ff = 96;
  t.n_encoder_layers = 2;
  t.n_decoder_layers = 2;
  t.num_buckets = 8;
  t.max_distance = 10;
  t.dropout = dropout;
  c.data.seq_len = kTe;
  c.data.decoder_seq_len = kTd;
  c.train.micro_batch = 2;
  c.train.global_batch = 8;
  c.train.steps = 3;
  c.train.seed = 5;
  c.train.eval_iters = 0;
  c.optim.schedule.lr = 1e-2;
  c.optim.schedule.min_lr = 1e-3;
  c.optim.schedule.warmup_steps = 1;
  c.optim.schedule.decay_steps = 3;
  c.optim.schedule.style = DecayStyle::kCosine;
  c.optim.weight_decay = 0.1;
  c.optim.clip_grad = 1.0;
  return c;
}

struct Layout {
  int tp = 1, pp = 1, dp = 1, split = 0;
  int64_t enc_layers = 2;
  bool sequence_parallel = false;
  std::string recompute = "none";
  std::string name() const {
    return absl::StrFormat("tp%d pp%d (split %d, %d + %d layers) dp%d%s recompute %s", tp, pp,
                           split, enc_layers, enc_layers, dp, sequence_parallel ? " sp" : "",
                           recompute);
  }
};

std::vector<Layout> layouts(int world) {
  const std::vector<Layout> all = {{1, 2, 1, 1, 2},
                                   {1, 2, 2, 1, 2},
                                   {1, 4, 1, 2, 2},
                                   {1, 4, 1, 1, 3},
                                   {2, 2, 1, 1, 2},
                                   {2, 2, 2, 1, 2},
                                   {2, 1, 1, 0, 2, true, "full"},
                                   {2, 2, 1, 1, 2, true, "full"},
                                   {2, 2, 2, 1, 2, true}};
  std::vector<Layout> out;
  for (const Layout& l : all) {
    if (l.tp * l.pp * l.dp == world) out.push_back(l);
  }
  return out;
}

struct Run {
  std::unique_ptr<Trainer> trainer;
  std::vector<double> losses, norms;
};

Run train(const TrainConfig& cfg, const Precision& prec, const TrainerParallel& par) {
  Run r;
  auto t = Trainer::create(cfg, prec, testing_parallel::hashed_t5_samples(kTe, kTd, kVocab), {},
                           engine::LogContext{}, par);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return r;
  r.trainer = std::move(*t);
  for (int64_t i = 0; i < cfg.train.steps; ++i) {
    const StepStats st = r.trainer->step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  return r;
}

// Every layout of the world against one rank; rtol for losses, norms and (when params) the
// parameters, rtol_split where a stack spans several stages.
void check_layouts(const Precision& prec, double rtol, double rtol_split, bool params) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<Layout> ls = layouts(world);
  if (ls.empty()) GTEST_SKIP() << "no T5 pipeline layout of " << world << " ranks";
  for (const Layout& l : ls) {
    SCOPED_TRACE(l.name());
    TrainConfig cfg = tiny_t5_config(l.tp > 1 ? 0.0f : 0.1f);
    t5_config(cfg).n_encoder_layers = t5_config(cfg).n_decoder_layers = l.enc_layers;
    Run ref = train(cfg, prec, TrainerParallel{});
    cfg.parallel.tp = l.tp;
    cfg.parallel.pp = l.pp;
    cfg.parallel.dp = l.dp;
    cfg.parallel.pp_split_rank = l.split;
    cfg.parallel.sequence_parallel = l.sequence_parallel;
    cfg.parallel.recompute = l.recompute;
    cfg.parallel.timeout_s = 120;
    auto lc = parallel::testing::layout_comms(l.tp, l.pp, l.dp);
    ASSERT_TRUE(lc.ok()) << lc.status();
    TrainerParallel par;
    par.grid = &(*lc)->grid;
    par.comms = &(*lc)->comms;
    par.local_rank = rank;
    Run run = train(cfg, prec, par);
    ASSERT_TRUE(ref.trainer && run.trainer);
    const double tol = l.pp > 2 ? rtol_split : rtol;  // pp > 2: a stack spans stages
    for (size_t i = 0; i < ref.losses.size(); ++i) {
      EXPECT_GT(ref.norms[i], 0.0);
      EXPECT_NEAR(run.losses[i], ref.losses[i], tol * std::abs(ref.losses[i])) << "step " << i;
      EXPECT_NEAR(run.norms[i], ref.norms[i], tol * ref.norms[i]) << "step " << i;
    }
    if (!params) continue;
    T5Model &m = t5_model(run.trainer->model()), &r = t5_model(ref.trainer->model());
    for (const Param& p : m.params().all()) {
      const Param* q = r.params().find(p.name);
      ASSERT_NE(q, nullptr) << p.name;
      const std::vector<double> whole = testing::to_host_f64(q->value);
      std::vector<double> want;
      for (int64_t i = 0; i < p.numel(); ++i) {
        want.push_back(
            whole[static_cast<size_t>(tp_global_index(p, i, l.tp, (*lc)->grid.tp_rank()))]);
      }
      EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(p.value), want,
                                        {tol, 10 * tol, tol * tol}, true))
          << p.name;
    }
  }
}

TEST(T5TrainerParallel, EveryLayoutEqualsOneRank) {
  check_layouts({engine::Device::kCpu, DType::kF64, DType::kF64}, 1e-9, 1e-5, true);
}

// The same layouts through NCCL, one GPU per rank.
TEST(T5TrainerParallelGpu, EveryLayoutEqualsOneGpuThroughNccl) {
  const char* on = std::getenv("ANVIL_PARALLEL_GPU");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set ANVIL_PARALLEL_GPU=1";
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (engine::cuda_device_count() < world) {
    GTEST_SKIP() << world << " ranks need as many GPUs, have " << engine::cuda_device_count();
  }
  check_layouts({engine::Device::kCuda, DType::kBF16, DType::kF32}, 2e-2, 2e-2, false);
}

}  // namespace
}  // namespace anvil::model
