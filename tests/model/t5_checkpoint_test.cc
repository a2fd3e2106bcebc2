// T5 checkpoints on the CPU, in-process (model/t5/t5_checkpoint.h over io/checkpoint.h): a tiny
// T5 v1.1 (dropout on) trained 8 steps, and the same run saved at step 4, stopped and continued by
// a fresh Trainer from the checkpoint, give bitwise the same losses for steps 5-8 (the
// weights, AdamW moments, step counters, dropout counter, data position and lr schedule all
// restored; on a GPU too, in bf16). finetune loads weights only. Another architecture, a GPT config
// or a truncated tensor file is refused with a message naming the key or the file. The four
// pipeline stages of a T5 v1.0 (pp 4, split 2) write each element once (a parameter several
// stages hold by the first of them) and their checkpoint holds the whole model's tensors; loading
// it sets every stage's copies.
#include "model/t5/t5_checkpoint.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/t5/t5_train_model.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "tests/io/io_test_util.h"
#include "tests/parallel/tiny_t5_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using testing_parallel::hashed_t5_samples;
using testing_parallel::tiny_t5_train_config;

std::unique_ptr<Trainer> make_trainer(const TrainConfig& cfg, const Precision& prec = Precision{}) {
  auto t = Trainer::create(
      cfg, prec,
      hashed_t5_samples(cfg.data.seq_len, cfg.data.decoder_seq_len, t5_config(cfg).vocab_size), {});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

// As bin/train saves on one rank.
absl::Status save(Trainer& t, const TrainConfig& cfg, const std::string& dir) {
  io::CheckpointInfo info;
  info.step = t.steps_done();
  info.model = checkpoint_model_record(cfg);
  info.state = checkpoint_counters(t.state(), cfg);
  info.layout = checkpoint_layout(cfg);
  info.lr_schedule = checkpoint_lr_schedule(cfg, t.state());
  return io::save_checkpoint(dir, info, t5_checkpoint_slices(t5_model(t.model()), 0, t.stream()),
                             2);
}

// As bin/train loads: the newest complete checkpoint, its model checked first.
absl::Status load(Trainer& t, const TrainConfig& cfg, const std::string& dir, bool finetune) {
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c, io::open_newest_complete(dir, -1, [](const auto&) {}));
  ANVIL_RETURN_IF_ERROR(check_checkpoint_model(c.info().model, cfg, c.dir()));
  ANVIL_RETURN_IF_ERROR(t5_load_checkpoint(
      t5_model(t.model()), [&](const std::string& name) { return c.read(name); }, finetune,
      t.stream()));
  if (finetune) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(TrainerState s, trainer_state_from(c.info().state, cfg));
  t.restore(s);
  return absl::OkStatus();
}

// Runs `cfg` and saves after step `at`, stopping there.
void run_and_save(const TrainConfig& cfg, int64_t at, const std::string& dir,
                  const Precision& prec = Precision{}) {
  std::unique_ptr<Trainer> first = make_trainer(cfg, prec);
  ASSERT_NE(first, nullptr);
  absl::Status saved;
  first->set_step_hook([&](const StepStats& st) {
    if (st.step != at) return false;
    saved = save(*first, cfg, dir);
    return true;
  });
  EXPECT_EQ(first->run().losses.size(), static_cast<size_t>(at));
  ASSERT_TRUE(saved.ok()) << saved;
}

void expect_continues_bitwise(const TrainConfig& cfg, const Precision& prec) {
  io::testing::ScratchDir dir;
  std::unique_ptr<Trainer> whole = make_trainer(cfg, prec);
  ASSERT_NE(whole, nullptr);
  const std::vector<double> want = whole->run().losses;
  ASSERT_EQ(want.size(), 8u);
  EXPECT_NE(want[0], want[7]);  // it trains

  run_and_save(cfg, 4, dir.path(), prec);
  std::unique_ptr<Trainer> second = make_trainer(cfg, prec);
  ASSERT_NE(second, nullptr);
  const absl::Status loaded = load(*second, cfg, dir.path(), false);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(second->steps_done(), 4);
  EXPECT_EQ(second->state().consumed_samples, 4 * 8);
  EXPECT_EQ(second->state().micro_batches, 4u * 4u);
  const std::vector<double> got = second->run().losses;
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[4 + i]) << "step " << 5 + i;
}

TEST(T5CheckpointTest, ContinuesBitwise) {
  expect_continues_bitwise(tiny_t5_train_config(8), Precision{});
}

// On the GPU (bf16 compute copy rounded from the f32 master on load; flash attention needs
// d_kv 64): the same, bitwise (the T5 kernels are deterministic).
TEST(T5CheckpointTest, ContinuesBitwiseOnCuda) {
  ANVIL_SKIP_WITHOUT_GPU();
  TrainConfig cfg = tiny_t5_train_config(8);
  t5_config(cfg).d_model = 64;
  t5_config(cfg).d_kv = 64;
  t5_config(cfg).n_heads = 2;
  t5_config(cfg).d_ff = 96;
  expect_continues_bitwise(
      cfg, Precision{engine::Device::kCuda, engine::DType::kBF16, engine::DType::kF32});
}

TEST(T5CheckpointTest, FinetuneLoadsWeightsOnly) {
  io::testing::ScratchDir dir;
  TrainConfig cfg = tiny_t5_train_config(3);
  run_and_save(cfg, 3, dir.path());
  cfg.train.seed = 11;  // a new run from the saved weights
  std::unique_ptr<Trainer> tuned = make_trainer(cfg);
  ASSERT_NE(tuned, nullptr);
  ASSERT_TRUE(load(*tuned, cfg, dir.path(), true).ok());
  EXPECT_EQ(tuned->steps_done(), 0);
  auto c = io::Checkpoint::open(io::checkpoint_step_dir(dir.path(), 3));
  ASSERT_TRUE(c.ok()) << c.status();
  for (const char* name :
       {"shared.weight", "decoder.block.1.layer.1.EncDecAttention.kv.weight",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}) {
    const Param* w = t5_model(tuned->model()).params().find(name);
    ASSERT_NE(w, nullptr) << name;
    auto saved = c->read(std::string(kMasterState) + name);
    ASSERT_TRUE(saved.ok()) << saved.status();
    const float* m = static_cast<const float*>(w->master.data);
    const float* mom = static_cast<const float*>(w->m.data);
    ASSERT_LE(saved->data.size(), static_cast<size_t>(w->numel())) << name;  // no padding rows
    for (size_t i = 0; i < saved->data.size(); ++i) {
      ASSERT_EQ(m[i], saved->data[i]) << name << " " << i;
      ASSERT_EQ(mom[i], 0.0f) << name << " " << i;
    }
  }
}

TEST(T5CheckpointTest, RefusesAnotherArchitecture) {
  io::testing::ScratchDir dir;
  TrainConfig cfg = tiny_t5_train_config(1);
  run_and_save(cfg, 1, dir.path());
  TrainConfig wider = cfg;
  t5_config(wider).d_ff = 32;
  std::unique_ptr<Trainer> other = make_trainer(wider);
  ASSERT_NE(other, nullptr);
  absl::Status s = load(*other, wider, dir.path(), false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[model] ffn_hidden: checkpoint 24, config 32"), std::string::npos)
      << s;

  TrainConfig v10 = cfg;
  t5_config(v10).version = T5Version::kV1_0;
  s = check_checkpoint_model(checkpoint_model_record(cfg), v10, "ckpt");
  EXPECT_NE(s.message().find("ckpt was saved from another model ([model] t5_version: checkpoint "
                             "1.1, config 1.0)"),
            std::string::npos)
      << s;
  TrainConfig gpt;  // GPT: the family is named first
  s = check_checkpoint_model(checkpoint_model_record(cfg), gpt, "ckpt");
  EXPECT_NE(s.message().find("another model ([model] type: checkpoint t5, config gpt)"),
            std::string::npos)
      << s;
  // Older checkpoints record nothing: not checked.
  EXPECT_TRUE(check_checkpoint_model({}, gpt, "ckpt").ok());
}

TEST(T5CheckpointTest, RefusesATruncatedTensorFile) {
  io::testing::ScratchDir dir;
  const TrainConfig cfg = tiny_t5_train_config(1);
  run_and_save(cfg, 1, dir.path());
  const std::string file = io::checkpoint_step_dir(dir.path(), 1) + "/rank_00000.safetensors";
  ASSERT_TRUE(io::testing::file_exists(file));
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 100);
  std::string warned;
  auto c = io::open_newest_complete(dir.path(), -1,
                                    [&](const std::string& w) { absl::StrAppend(&warned, w); });
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(warned.find("step_00000001/rank_00000.safetensors"), std::string::npos) << warned;
}

// A T5 model of `cfg` seeded with `seed`: one pipeline stage of `pp` (split pp / 2), or the
// whole model with pp 1.
std::unique_ptr<T5Model> make_model(const T5Config& cfg, int pp, int stage, uint64_t seed) {
  T5Shard shard;
  shard.pp = pp;
  shard.pp_rank = stage;
  shard.pp_split = pp / 2;
  auto m = T5Model::create(cfg, {2, 8, 6}, Precision{}, seed, shard);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Writes distinct AdamW moments (f32 on the CPU) outside the padding rows of the vocabulary
// (a checkpoint does not keep those), so that the round trip of m and v shows.
void fill_moments(T5Model& m) {
  for (const Param& p : m.params().all()) {
    const int64_t n = p.vocab_rows ? m.config().vocab_size * p.shape[1] : p.numel();
    float* mom = static_cast<float*>(p.m.data);
    float* sq = static_cast<float*>(p.v.data);
    for (int64_t i = 0; i < n; ++i) {
      mom[i] = 1e-3f * static_cast<float>((p.offset + i) % 97);
      sq[i] = 1e-4f * static_cast<float>((p.offset + i) % 89);
    }
  }
}

std::set<std::string> master_names(const std::vector<engine::HostSlice>& slices) {
  std::set<std::string> out;
  for (const engine::HostSlice& s : slices) {
    if (s.tensor.rfind(kMasterState, 0) == 0) out.insert(s.tensor.substr(7));
  }
  return out;
}

TEST(T5CheckpointTest, PipelineStagesWriteSharedParametersOnceAndLoadEveryCopy) {
  T5Config cfg = t5_config(tiny_t5_train_config(1));
  cfg.version = T5Version::kV1_0;  // tied: the shared embedding also ends the model
  constexpr int kPp = 4;
  std::unique_ptr<T5Model> whole = make_model(cfg, 1, 0, 7);
  ASSERT_NE(whole, nullptr);
  fill_moments(*whole);
  engine::Stream stream = engine::Stream::cpu();

  // Stages 0-1 hold encoder layers 0 and 1, stages 2-3 decoder layers 0 and 1. The shared
  // embedding is on stages 0, 2 and 3, the encoder's relative table on 0 and 1, the decoder's on
  // 2 and 3: each is written by the first of its stages.
  const std::string shared = "shared.weight";
  const std::string rel_enc =
      "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  const std::string rel_dec =
      "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  const std::map<std::string, int> writer = {{shared, 0}, {rel_enc, 0}, {rel_dec, 2}};
  io::testing::ScratchDir dir;
  ASSERT_TRUE(io::begin_checkpoint(dir.path(), 1, "t").ok());
  const std::string tmp = io::checkpoint_tmp_dir(dir.path(), 1, "t");
  for (int s = 0; s < kPp; ++s) {
    std::unique_ptr<T5Model> stage = make_model(cfg, kPp, s, 7);
    ASSERT_NE(stage, nullptr);
    for (const auto& [name, first] : writer) {
      const Param* p = stage->params().find(name);
      if (p != nullptr) {
        EXPECT_EQ(stage->first_copy(*p), s == first) << name << " " << s;
      }
    }
    const std::vector<engine::HostSlice> slices = t5_checkpoint_slices(*stage, 0, stream);
    const std::set<std::string> names = master_names(slices);
    for (const auto& [name, first] : writer) {
      EXPECT_EQ(names.count(name), s == first ? 1u : 0u) << "stage " << s << ": " << name;
    }
    ASSERT_TRUE(io::write_checkpoint_shard(tmp, s, slices).ok());
  }
  io::CheckpointInfo info;
  info.step = 1;
  ASSERT_TRUE(io::finish_checkpoint(dir.path(), tmp, kPp, info, 0).ok());
  auto c = io::Checkpoint::open(io::checkpoint_step_dir(dir.path(), 1));
  ASSERT_TRUE(c.ok()) << c.status();
  // Every tensor read back whole (the pieces cover it exactly once) holds the whole model's
  // initial values: the stages initialize their parameters as the whole model does.
  const std::vector<engine::HostSlice> want = t5_checkpoint_slices(*whole, 0, stream);
  for (const engine::HostSlice& w : want) {
    if (w.tensor.rfind(kMasterState, 0) != 0) continue;
    auto got = c->read(w.tensor);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->data, w.data) << w.tensor;
  }

  // The whole model's checkpoint (moments included) loaded into fresh stages of another seed:
  // every copy of every parameter equals the whole model's.
  io::testing::ScratchDir whole_dir;
  io::CheckpointInfo whole_info;
  whole_info.step = 1;
  ASSERT_TRUE(io::save_checkpoint(whole_dir.path(), whole_info, want, 0).ok());
  auto wc = io::Checkpoint::open(io::checkpoint_step_dir(whole_dir.path(), 1));
  ASSERT_TRUE(wc.ok()) << wc.status();
  for (int s = 0; s < kPp; ++s) {
    std::unique_ptr<T5Model> stage = make_model(cfg, kPp, s, 99);
    ASSERT_NE(stage, nullptr);
    const absl::Status loaded = t5_load_checkpoint(
        *stage, [&](const std::string& name) { return wc->read(name); }, false, stream);
    ASSERT_TRUE(loaded.ok()) << loaded;
    for (const Param& p : stage->params().all()) {
      const Param* q = whole->params().find(p.name);
      ASSERT_NE(q, nullptr) << p.name;
      for (engine::TensorView Param::*field : {&Param::value, &Param::m, &Param::v}) {
        EXPECT_EQ(testing::to_host_f64(p.*field), testing::to_host_f64(q->*field))
            << "stage " << s << ": " << p.name;
      }
    }
  }
}

}  // namespace
}  // namespace anvil::model
