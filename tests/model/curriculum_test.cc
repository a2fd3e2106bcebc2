// Sequence-length curriculum: curriculum_seqlen per step against DeepSpeed's CurriculumScheduler
// as Megatron-DeepSpeed drives it (tests/model/fixtures/curriculum_schedule.txt, written by
// scripts/make_curriculum_fixture.py, a transcription of its code), for every schedule type;
// [curriculum] parsing and its errors; and the trainer: a curriculum step of length t equals a
// step of a run whose samples are t tokens long (the fork truncates tokens, labels, loss mask
// and positions), and the lr scheduler's token count is the sum of the truncated tokens.
#include "model/train/curriculum.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

struct FixtureCase {
  std::string name;
  std::map<std::string, std::string> params;
  std::vector<std::pair<int64_t, int64_t>> steps;  // (step, seqlen)
};

std::string fixture_path() {
  const std::string here = __FILE__;
  const std::string beside = here.substr(0, here.rfind('/')) + "/fixtures/curriculum_schedule.txt";
  if (std::ifstream(beside).good()) return beside;
  return "tests/model/fixtures/curriculum_schedule.txt";  // from the source root (ctest)
}

std::vector<FixtureCase> read_fixture() {
  std::ifstream in(fixture_path());
  EXPECT_TRUE(in.good()) << fixture_path();
  std::vector<FixtureCase> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    if (kind == "case") {
      out.emplace_back();
      f >> out.back().name;
    } else if (kind == "param") {
      std::string k, v;
      f >> k >> v;
      out.back().params[k] = v;
    } else if (kind == "step") {
      int64_t s = 0, d = 0;
      f >> s >> d;
      out.back().steps.emplace_back(s, d);
    }
  }
  return out;
}

std::vector<int64_t> ints(const std::string& s) {
  std::vector<int64_t> v;
  for (absl::string_view p : absl::StrSplit(s, ',')) v.push_back(std::stoll(std::string(p)));
  return v;
}

CurriculumConfig to_config(const FixtureCase& fc) {
  CurriculumConfig c;
  c.enabled = true;
  const std::string& sched = fc.params.at("schedule");
  c.schedule = sched == "fixed_linear" ? CurriculumSchedule::kFixedLinear
               : sched == "fixed_root" ? CurriculumSchedule::kFixedRoot
                                       : CurriculumSchedule::kFixedDiscrete;
  c.min_difficulty = std::stoll(fc.params.at("min_difficulty"));
  c.max_difficulty = std::stoll(fc.params.at("max_difficulty"));
  auto num = [&](const char* k, int64_t fallback) {
    auto it = fc.params.find(k);
    return it == fc.params.end() ? fallback : std::stoll(it->second);
  };
  c.total_curriculum_step = num("total_curriculum_step", 0);
  c.difficulty_step = num("difficulty_step", 8);
  c.root_degree = num("root_degree", 2);
  if (fc.params.count("difficulty")) c.difficulty = ints(fc.params.at("difficulty"));
  if (fc.params.count("max_step")) c.max_step = ints(fc.params.at("max_step"));
  return c;
}

TEST(CurriculumTest, EverySchedulesLengthsEqualDeepSpeeds) {
  const std::vector<FixtureCase> cases = read_fixture();
  ASSERT_EQ(cases.size(), 9u);
  std::map<std::string, int> per_schedule;
  for (const FixtureCase& fc : cases) {
    const CurriculumConfig c = to_config(fc);
    ASSERT_FALSE(fc.steps.empty()) << fc.name;
    per_schedule[fc.params.at("schedule")]++;
    for (const auto& [step, want] : fc.steps) {
      EXPECT_EQ(curriculum_seqlen(c, step, 1 << 20), want) << fc.name << " step " << step;
    }
  }
  EXPECT_EQ(per_schedule["fixed_linear"], 3);
  EXPECT_EQ(per_schedule["fixed_root"], 2);
  EXPECT_EQ(per_schedule["fixed_discrete"], 4);
}

TEST(CurriculumTest, LengthIsCappedAtTheSamplesLength) {
  CurriculumConfig c;
  c.enabled = true;
  c.schedule = CurriculumSchedule::kFixedDiscrete;
  c.min_difficulty = 4;
  c.max_difficulty = 64;
  c.difficulty = {4, 64};
  c.max_step = {2};
  EXPECT_EQ(curriculum_seqlen(c, 1, 16), 4);
  EXPECT_EQ(curriculum_seqlen(c, 3, 16), 16);
}

absl::StatusOr<TrainConfig> load(const std::string& curriculum) {
  const std::string ini =
      "[model]\nvocab_size = 64\nd_model = 16\nn_heads = 2\nn_layers = 1\nmax_seq_len = 64\n"
      "[data]\nseq_len = 64\n[train]\nmicro_batch = 1\nglobal_batch = 1\nsteps = 10\n"
      "device = cpu\n[curriculum]\n" +
      curriculum;
  return load_train_config_string(ini, "test.ini", {});
}

TEST(CurriculumTest, ParsesTheSection) {
  auto t = load(
      "enabled = true\nschedule = fixed_root\nmin_difficulty = 8\nmax_difficulty = 64\n"
      "total_curriculum_step = 5\ndifficulty_step = 8\nroot_degree = 3\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->curriculum.enabled);
  EXPECT_EQ(t->curriculum.schedule, CurriculumSchedule::kFixedRoot);
  EXPECT_EQ(t->curriculum.root_degree, 3);
  auto d = load(
      "enabled = true\nschedule = fixed_discrete\nmin_difficulty = 8\n"
      "max_difficulty = 64\ndifficulty = 8, 32 64\nmax_step = 3,7\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->curriculum.difficulty, (std::vector<int64_t>{8, 32, 64}));
  EXPECT_EQ(d->curriculum.max_step, (std::vector<int64_t>{3, 7}));
  auto off = load("");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->curriculum.enabled);
}

TEST(CurriculumTest, RefusesBadSettingsByName) {
  auto msg = [](const std::string& s) {
    auto t = load("enabled = true\n" + s);
    return t.ok() ? std::string("ok") : std::string(t.status().message());
  };
  EXPECT_THAT(msg("type = vocab\ntotal_curriculum_step = 5\n"),
              HasSubstr("[curriculum] type: \"vocab\": expected seqlen"));
  EXPECT_THAT(msg("schedule = custom\n"), HasSubstr("[curriculum] schedule: \"custom\""));
  EXPECT_THAT(msg("max_difficulty = 128\ntotal_curriculum_step = 5\n"),
              HasSubstr("[curriculum] max_difficulty: 128: must be <= [data] seq_len 64"));
  EXPECT_THAT(msg("max_difficulty = 64\n"),
              HasSubstr("[curriculum] total_curriculum_step: must be >= 1"));
  EXPECT_THAT(msg("max_difficulty = 64\ntotal_curriculum_step = 5\nmin_difficulty = 4\n"),
              HasSubstr("[curriculum] difficulty_step: 8: must be in 1 .. [curriculum] "
                        "min_difficulty 4"));
  EXPECT_THAT(msg("max_difficulty = 64\nschedule = fixed_discrete\ndifficulty = 8,16\n"
                  "max_step = 2,4\n"),
              HasSubstr("one more difficulty than max_step entries, got 2 and 2"));
  EXPECT_THAT(msg("max_difficulty = 64\nschedule = fixed_discrete\ndifficulty = 8,x\n"
                  "max_step = 2\n"),
              HasSubstr("[curriculum] difficulty: \"x\" is not an integer"));
  EXPECT_THAT(msg("max_difficulty = 64\nschedule = fixed_discrete\ndifficulty = 8,65\n"
                  "max_step = 2\n"),
              HasSubstr("65: every length must be in 1 .. [data] seq_len 64"));
  auto bert = load_train_config_string(
      "[model]\ntype = bert\nvocab_size = 64\nd_model = 16\nn_heads = 2\nn_layers = 1\n"
      "max_seq_len = 64\n[data]\nseq_len = 64\n[train]\nmicro_batch = 1\nglobal_batch = 1\n"
      "device = cpu\n[curriculum]\nenabled = true\nmax_difficulty = 64\n"
      "total_curriculum_step = 5\n",
      "bert.ini", {});
  ASSERT_FALSE(bert.ok());
  EXPECT_THAT(std::string(bert.status().message()),
              HasSubstr("[curriculum] enabled: sequence-length curriculum truncates causal"));
}

// The trainer on a tiny GPT --------------------------------------------------------------------

TrainConfig tiny(int64_t seq_len) {
  TrainConfig c;
  c.model.vocab_size = 12;
  c.model.max_seq_len = 16;
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.n_layers = 2;
  c.data.seq_len = seq_len;
  c.train.micro_batch = 2;
  c.train.global_batch = 4;
  c.train.steps = 6;
  c.train.seed = 7;
  c.train.device = "cpu";
  c.train.eval_iters = 0;
  c.train.log_interval = 1;
  c.optim.schedule.lr = 1e-2;
  c.optim.schedule.min_lr = 1e-3;
  c.optim.schedule.warmup_steps = 2;
  c.optim.schedule.decay_steps = 6;
  // Token-based decay: the schedule sees Megatron's consumed_train_tokens.
  c.optim.schedule.decay_tokens = 200;
  return c;
}

// Sample i: seq_len + 1 pseudo-random tokens; the same prefix at every seq_len.
SampleFn samples(int64_t seq_len) {
  return [seq_len](int64_t index, int32_t* out) {
    for (int64_t t = 0; t <= seq_len; ++t) {
      out[t] = static_cast<int32_t>((index * 7 + t * t * 3 + t) % 12);
    }
  };
}

Precision cpu_f32() {
  return Precision{engine::Device::kCpu, engine::DType::kF32, engine::DType::kF32};
}

TEST(CurriculumTrainerTest, StepEqualsARunOnTheTruncatedSamples) {
  for (bool eod_mask : {false, true}) {
    TrainConfig cur = tiny(16);
    cur.data.eod_mask_loss = eod_mask;
    cur.data.eod_token = 5;
    cur.curriculum.enabled = true;
    cur.curriculum.schedule = CurriculumSchedule::kFixedDiscrete;
    cur.curriculum.min_difficulty = 8;
    cur.curriculum.max_difficulty = 16;
    cur.curriculum.difficulty = {8, 16};
    cur.curriculum.max_step = {1};
    TrainConfig shortened = tiny(8);
    shortened.data.eod_mask_loss = eod_mask;
    shortened.data.eod_token = 5;
    auto a = Trainer::create(cur, cpu_f32(), samples(16), nullptr);
    auto b = Trainer::create(shortened, cpu_f32(), samples(8), nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    const StepStats sa = (*a)->step(), sb = (*b)->step();
    EXPECT_EQ(sa.seq_len, 8);
    EXPECT_EQ(sb.seq_len, 8);
    EXPECT_NEAR(sa.loss, sb.loss, 1e-5 * std::abs(sb.loss)) << "eod_mask " << eod_mask;
    EXPECT_NEAR(sa.grad_norm, sb.grad_norm, 1e-4 * sb.grad_norm) << "eod_mask " << eod_mask;
    // The parameters after the update are the same: the next steps on the same short samples
    // agree too (the curriculum run's step 2 is at full length; compare its state instead).
    EXPECT_EQ((*a)->state().consumed_tokens, 4 * 8);
    const StepStats sa2 = (*a)->step();
    EXPECT_EQ(sa2.seq_len, 16);
    EXPECT_EQ((*a)->state().consumed_tokens, 4 * 8 + 4 * 16);
  }
}

// The lr scheduler sees the truncated token count (the fork's consumed_train_tokens): with
// token-based decay, the lr of step k is the closed form at the tokens of the steps before it.
TEST(CurriculumTrainerTest, TokenBasedDecaySeesTruncatedTokens) {
  TrainConfig cfg = tiny(16);
  cfg.curriculum.enabled = true;
  cfg.curriculum.schedule = CurriculumSchedule::kFixedLinear;
  cfg.curriculum.min_difficulty = 4;
  cfg.curriculum.max_difficulty = 16;
  cfg.curriculum.total_curriculum_step = 4;
  cfg.curriculum.difficulty_step = 4;
  auto t = Trainer::create(cfg, cpu_f32(), samples(16), nullptr);
  ASSERT_TRUE(t.ok());
  // Lengths: floor(s/4 * 12 + 4) rounded down to 4: 7->4, 10->8, 13->12, 16, 16, 16.
  const std::vector<int64_t> want_len = {4, 8, 12, 16, 16, 16};
  const LrSchedule& s = cfg.optim.schedule;
  const int64_t G = 4, W = 2 * G;  // warmup in samples
  // The fork's consumed_train_tokens after m steps.
  auto prefix = [&](int64_t m) {
    int64_t n = 0;
    for (int64_t j = 0; j < m; ++j) n += G * want_len[static_cast<size_t>(j)];
    return n;
  };
  // train_step's lr_scheduler.step(G) runs before consumed_train_tokens grows by its step's
  // tokens: step k uses num_steps (k-1) G and num_tokens prefix(k - 2), the decay counting
  // from warmup_tokens, the num_tokens of the call that reached num_steps == W.
  const int64_t warmup_tokens = prefix(W / G - 1);
  for (int64_t k = 1; k <= 6; ++k) {
    const StepStats st = (*t)->step();
    ASSERT_FALSE(st.skipped);
    EXPECT_EQ(st.seq_len, want_len[static_cast<size_t>(k - 1)]) << k;
    const int64_t n = (k - 1) * G;
    double want = 0.0;
    if (n <= W) {
      want = s.lr * static_cast<double>(n) / static_cast<double>(W);
    } else {
      const double r = static_cast<double>(prefix(k - 2) - warmup_tokens) /
                       static_cast<double>(200 - warmup_tokens);
      want = s.min_lr + 0.5 * (std::cos(M_PI * r) + 1.0) * (s.lr - s.min_lr);
    }
    EXPECT_NEAR(st.lr, want, 1e-12) << "step " << k;
  }
  EXPECT_EQ((*t)->state().consumed_tokens, 4 * (4 + 8 + 12 + 16 + 16 + 16));
  EXPECT_EQ((*t)->state().lr.tokens, 4 * (4 + 8 + 12 + 16 + 16));
}

}  // namespace
}  // namespace anvil::model
