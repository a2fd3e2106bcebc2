// Prefix-LM (model/train/prefix_lm.h, [data] prefix_lm) against tests/model/fixtures/
// prefix_lm.txt, written by scripts/make_prefix_lm_fixture.py, a transcription of
// Megatron-DeepSpeed's get_prefix_indices / get_ltor_masks_and_position_ids /
// reweight_loss_mask_ over CPython's random module:
//   - engine/python_random: getrandbits and randint of random.Random(seed), 128-bit seeds too;
//   - each sample's prefix indices (per row, per document), its loss mask (targets -1 exactly
//     where the fork's loss_mask is 0, with eod_mask_loss and loss_on_targets_only), the dense
//     mask the op's visibility rule gives from the segments and prefix ends (equal to the fork's
//     attention mask element by element), and the position-frequency weights (f32, exact);
//   - the trainer's wiring: evaluate() on fixture samples equals a forward of the fixture's
//     tokens, positions, targets, segments and prefix ends built here from the fixture (and
//     differs from the plain causal forward, so the prefix reaches the attention).
#include "model/train/prefix_lm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/python_random.h"
#include "gtest/gtest.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/trainer.h"
#include "ops/flash_attention_detail.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

struct Sample {
  int64_t index = 0;
  std::vector<int32_t> record, prefix, positions;
  std::vector<float> loss_mask;
  std::vector<std::string> mask;  // row i: '1' where query i sees key j
};

struct FixtureCase {
  std::string name;
  std::map<std::string, int64_t> params;
  double pipe_tokens_per_sample = 0.0;  // GPTModelPipe's average_tokens_per_sample
  std::vector<Sample> samples;
};

struct Fixture {
  std::vector<std::string> random_lines, randint_lines;
  std::vector<FixtureCase> cases;
};

std::string fixture_path() {
  const std::string here = __FILE__;
  const std::string beside = here.substr(0, here.rfind('/')) + "/fixtures/prefix_lm.txt";
  if (std::ifstream(beside).good()) return beside;
  return "tests/model/fixtures/prefix_lm.txt";  // from the source root (ctest)
}

template <typename T>
std::vector<T> rest(std::istringstream& in) {
  std::vector<T> v;
  T x;
  while (in >> x) v.push_back(x);
  return v;
}

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    std::ifstream in(fixture_path());
    EXPECT_TRUE(in.good()) << fixture_path();
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string tag;
      ls >> tag;
      if (tag == "random") {
        out.random_lines.push_back(line);
      } else if (tag == "randint") {
        out.randint_lines.push_back(line);
      } else if (tag == "case") {
        out.cases.emplace_back();
        ls >> out.cases.back().name;
      } else if (tag == "param") {
        std::string key;
        int64_t v = 0;
        ls >> key >> v;
        out.cases.back().params[key] = v;
      } else if (tag == "pipe_tokens_per_sample") {
        ls >> out.cases.back().pipe_tokens_per_sample;
      } else if (tag == "sample") {
        out.cases.back().samples.emplace_back();
        ls >> out.cases.back().samples.back().index;
      } else if (tag == "record") {
        out.cases.back().samples.back().record = rest<int32_t>(ls);
      } else if (tag == "prefix") {
        out.cases.back().samples.back().prefix = rest<int32_t>(ls);
      } else if (tag == "loss_mask") {
        // repr of a Python float holding an f32 value: exact through double.
        for (double w : rest<double>(ls)) {
          out.cases.back().samples.back().loss_mask.push_back(static_cast<float>(w));
        }
      } else if (tag == "position_ids") {
        out.cases.back().samples.back().positions = rest<int32_t>(ls);
      } else if (tag == "mask") {
        out.cases.back().samples.back().mask = rest<std::string>(ls);
      }
    }
    return out;
  }();
  return f;
}

// A decimal seed < 2^128 as (lo, hi) 64-bit words.
std::pair<uint64_t, uint64_t> seed_words(const std::string& dec) {
  unsigned __int128 v = 0;
  for (char c : dec) v = v * 10 + static_cast<unsigned>(c - '0');
  return {static_cast<uint64_t>(v), static_cast<uint64_t>(v >> 64)};
}

TEST(PythonRandom, MatchesCPython) {
  ASSERT_FALSE(fixture().random_lines.empty());
  for (const std::string& line : fixture().random_lines) {
    SCOPED_TRACE(line);
    std::istringstream ls(line);
    std::string tag, seed;
    int n = 0;
    ls >> tag >> seed >> n;
    const auto [lo, hi] = seed_words(seed);
    engine::PythonRandom r(lo, hi);
    for (int64_t want : rest<int64_t>(ls)) EXPECT_EQ(r.getrandbits(32), want);
  }
  for (const std::string& line : fixture().randint_lines) {
    SCOPED_TRACE(line);
    std::istringstream ls(line);
    std::string tag, seed;
    int64_t a = 0, b = 0;
    ls >> tag >> seed >> a >> b;
    const auto [lo, hi] = seed_words(seed);
    engine::PythonRandom r(lo, hi);
    const std::vector<int64_t> want = rest<int64_t>(ls);
    ASSERT_EQ(want.size(), 8u);
    for (int64_t w : want) EXPECT_EQ(r.randint(a, b), w);
  }
}

PrefixLmOptions options_of(const FixtureCase& c) {
  PrefixLmOptions o;
  o.eod_token = static_cast<int32_t>(c.params.at("eod"));
  o.per_document = c.params.at("reset_attention_mask") != 0;
  o.loss_on_targets_only = c.params.at("loss_on_targets_only") != 0;
  o.seed = static_cast<uint64_t>(c.params.at("seed"));
  return o;
}

// Document ids as load_micro_batch builds them (eods before each token).
std::vector<int32_t> segments_of(const std::vector<int32_t>& tokens, int32_t eod) {
  std::vector<int32_t> seg(tokens.size());
  int32_t docs = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    seg[t] = docs;
    docs += tokens[t] == eod;
  }
  return seg;
}

TEST(PrefixLm, BatchConstructionMatchesTheFork) {
  ASSERT_EQ(fixture().cases.size(), 5u);
  for (const FixtureCase& c : fixture().cases) {
    SCOPED_TRACE(c.name);
    const PrefixLmOptions o = options_of(c);
    const int64_t T = c.params.at("seq_len");
    ASSERT_FALSE(c.samples.empty());
    for (const Sample& s : c.samples) {
      SCOPED_TRACE(s.index);
      const std::vector<int32_t> tokens(s.record.begin(), s.record.begin() + T);
      EXPECT_EQ(prefix_indices(o, s.index, tokens.data(), T), s.prefix);
      std::vector<int32_t> targets(s.record.begin() + 1, s.record.end());
      if (c.params.at("eod_mask_loss") != 0) {  // load_micro_batch's eod_mask_loss
        for (int64_t t = 0; t < T; ++t) {
          if (tokens[t] == o.eod_token) targets[t] = -1;
        }
      }
      std::vector<int32_t> prefix_end(T, -7);
      apply_prefix_lm(o, s.index, tokens.data(), T, prefix_end.data(), targets.data());
      const std::vector<int32_t> seg = segments_of(tokens, o.eod_token);
      for (int64_t i = 0; i < T; ++i) {
        EXPECT_EQ(targets[i] < 0, s.loss_mask[i] == 0.0f) << "loss mask at " << i;
        if (targets[i] >= 0) {
          EXPECT_EQ(targets[i], s.record[i + 1]);
        }
        if (c.params.at("reweight") != 0 && targets[i] >= 0) {
          EXPECT_EQ(position_frequency_weight(i, T), s.loss_mask[i]) << "weight at " << i;
        }
        for (int64_t j = 0; j < T; ++j) {
          const bool v = ops::detail::visible(
              true, i, j, 0, T, T, o.per_document ? seg.data() : nullptr,
              o.per_document ? seg.data() : nullptr, nullptr, prefix_end.data());
          EXPECT_EQ(v, s.mask[i][j] == '1') << "query " << i << " key " << j;
        }
      }
    }
  }
}

// A document of its eod alone (where the fork's randint raises) has no prefix and draws
// nothing: the next document's draw is the one a sample without it would take first.
TEST(PrefixLm, EodOnlyDocumentGetsNoPrefix) {
  PrefixLmOptions o;
  o.eod_token = 5, o.per_document = true, o.seed = 3;
  const std::vector<int32_t> tokens = {5, 1, 2, 5, 5, 3, 4, 6};
  const std::vector<int32_t> p = prefix_indices(o, 11, tokens.data(), 8);
  ASSERT_EQ(p.size(), 4u);  // [0], [1, 3], [4], [5, 8)
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[2], 4);
  engine::PythonRandom r(11, 3);
  EXPECT_EQ(p[1], r.randint(2, 3));
  EXPECT_EQ(p[3], r.randint(6, 8));
}

TrainConfig tiny_config(const FixtureCase& c) {
  TrainConfig cfg;
  cfg.model.vocab_size = 12;
  cfg.model.max_seq_len = 16;
  cfg.model.d_model = 32;
  cfg.model.n_heads = 2;
  cfg.model.n_layers = 2;
  cfg.data.seq_len = c.params.at("seq_len");
  cfg.data.eod_token = c.params.at("eod");
  cfg.data.seed = static_cast<uint64_t>(c.params.at("seed"));
  cfg.data.prefix_lm = true;
  cfg.data.reset_attention_mask = c.params.at("reset_attention_mask") != 0;
  cfg.data.reset_position_ids = c.params.at("reset_position_ids") != 0;
  cfg.data.eod_mask_loss = c.params.at("eod_mask_loss") != 0;
  cfg.data.loss_on_targets_only = c.params.at("loss_on_targets_only") != 0;
  cfg.data.reweight_loss = c.params.at("reweight") != 0;
  cfg.train.micro_batch = static_cast<int64_t>(c.samples.size());
  cfg.train.global_batch = cfg.train.micro_batch;  // one evaluation = one micro-batch
  cfg.train.steps = 2;
  cfg.train.seed = 7;
  cfg.train.device = "cpu";
  cfg.train.eval_iters = 1;
  cfg.optim.schedule.lr = 1e-2;
  cfg.optim.schedule.warmup_steps = 1;
  cfg.optim.schedule.decay_steps = 2;
  return cfg;
}

// The trainer's batches (load_micro_batch) against the fixture's, through the model: the loss
// of evaluate() equals sum_t w_t * (the loss sum of a forward of the fixture's inputs with only
// position t's counted targets), the weights w_t and counted targets being the fixture's loss
// mask, divided as the fork divides: GPTModelPipe's micro_batch x average_tokens_per_sample
// (the fixture's, in f32 as torch) and GPTModel's sum of the loss mask; the plain causal
// forward differs.
TEST(PrefixLm, TrainerBatchesAreTheFixtures) {
  const Precision prec{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  for (const FixtureCase& c : fixture().cases) {
    SCOPED_TRACE(c.name);
    TrainConfig cfg = tiny_config(c);
    const int64_t T = cfg.data.seq_len, B = cfg.train.micro_batch;
    const SampleFn samples = [&c](int64_t index, int32_t* out) {
      const std::vector<int32_t>& r = c.samples.at(static_cast<size_t>(index)).record;
      std::copy(r.begin(), r.end(), out);
    };
    auto trainer = Trainer::create(cfg, prec, samples, samples);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    std::vector<int32_t> tokens, positions, targets, segments, prefix_end;
    std::vector<float> weight;  // the fixture's loss mask: [B*T]
    double mask_sum = 0.0;
    for (const Sample& s : c.samples) {
      ASSERT_EQ(s.index, static_cast<int64_t>(&s - c.samples.data()));
      const std::vector<int32_t> tok(s.record.begin(), s.record.begin() + T);
      const std::vector<int32_t> seg = segments_of(tok, static_cast<int32_t>(cfg.data.eod_token));
      for (int64_t t = 0; t < T; ++t) {
        tokens.push_back(tok[t]);
        positions.push_back(s.positions[t]);
        targets.push_back(s.loss_mask[t] == 0.0f ? -1 : s.record[t + 1]);
        weight.push_back(s.loss_mask[t]);
        mask_sum += s.loss_mask[t];
        segments.push_back(seg[t]);
        // The fixture's prefix of t's row or document: the document's index is its id.
        prefix_end.push_back(s.prefix[cfg.data.reset_attention_mask ? seg[t] : 0]);
      }
    }
    ASSERT_EQ(static_cast<int64_t>(tokens.size()), B * T);
    ASSERT_GT(c.pipe_tokens_per_sample, 0.0);
    const double got = (*trainer)->evaluate();
    GptModel& m = gpt_model((*trainer)->model());
    engine::Stream& st = (*trainer)->stream();
    GptBatch batch{tokens.data(), positions.data(), nullptr,
                   cfg.data.reset_attention_mask ? segments.data() : nullptr};
    batch.prefix_end = prefix_end.data();
    // sum_t w_t * loss sum of position t, one forward per position (unweighted).
    double weighted = 0.0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> only_t(targets.size(), -1);
      float w_t = 0.0f;
      for (int64_t b = 0; b < B; ++b) {
        const size_t i = static_cast<size_t>(b * T + t);
        only_t[i] = targets[i];
        if (targets[i] >= 0) w_t = weight[i];  // the same for every counted sample
      }
      batch.targets = only_t.data();
      m.forward(batch, /*train=*/false, 0, st);
      weighted += static_cast<double>(w_t) * m.loss_sum(st);
    }
    const double want = weighted / (static_cast<double>(B) * c.pipe_tokens_per_sample);
    EXPECT_NEAR(got, want, 1e-6 * want);  // the fork's f32 mean vs the closed form
    batch.targets = targets.data();
    batch.prefix_end = nullptr;
    m.forward(batch, /*train=*/false, 0, st);
    EXPECT_GT(std::abs(m.loss_sum(st) / mask_sum - got), 1e-6 * got)
        << "the prefix must change the attention";
    const StepStats stats = (*trainer)->step();
    EXPECT_TRUE(std::isfinite(stats.loss) && stats.grad_norm > 0.0);

    // GPTModel's division (without DeepSpeed): by the sum of the loss mask.
    cfg.data.prefix_lm_normalizer = DataConfig::PrefixLmNormalizer::kMaskSum;
    auto plain = Trainer::create(cfg, prec, samples, samples);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_NEAR((*plain)->evaluate(), weighted / mask_sum, 1e-12 * want);
  }
}

// Per-token loss weights (GptBatch::loss_weights) on the model: weights of 2 double the loss sum
// and every gradient exactly (f64); weights of position t alone equal that position's loss.
TEST(PrefixLm, LossWeightsScaleLossAndGradients) {
  GptConfig g;
  g.vocab_size = 12;
  g.max_seq_len = 8;
  g.d_model = 16;
  g.n_heads = 2;
  g.n_layers = 1;
  const GptRunShape shape{2, 8};
  const Precision prec{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  engine::Stream s = engine::Stream::cpu();
  const int64_t n = shape.micro_batch * shape.seq_len;
  std::vector<int32_t> tokens(n), positions(n), targets(n);
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % 12);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % 12);
    positions[i] = static_cast<int32_t>(i % shape.seq_len);
  }
  auto run = [&](const std::vector<float>* w) {
    auto m = GptModel::create(g, shape, prec, /*seed=*/3);
    EXPECT_TRUE(m.ok()) << m.status();
    GptBatch b{tokens.data(), positions.data(), targets.data(), nullptr};
    if (w != nullptr) b.loss_weights = w->data();
    (*m)->zero_grads(s);
    (*m)->forward(b, /*train=*/true, 0, s);
    const double loss = (*m)->loss_sum(s);
    (*m)->backward(1.0f, s);
    std::vector<std::vector<double>> grads;
    for (const Param& p : (*m)->params().all()) grads.push_back(testing::to_host_f64(p.grad));
    return std::make_pair(loss, grads);
  };
  const std::vector<float> twos(static_cast<size_t>(n), 2.0f);
  const auto plain = run(nullptr), doubled = run(&twos);
  EXPECT_NEAR(doubled.first, 2.0 * plain.first, 1e-12 * plain.first);
  double norm = 0.0;
  for (size_t k = 0; k < plain.second.size(); ++k) {
    for (size_t i = 0; i < plain.second[k].size(); ++i) {
      EXPECT_NEAR(doubled.second[k][i], 2.0 * plain.second[k][i], 1e-12) << k << "," << i;
      norm += plain.second[k][i] * plain.second[k][i];
    }
  }
  EXPECT_GT(norm, 0.0);
  std::vector<float> one_hot(static_cast<size_t>(n), 0.0f);
  one_hot[5] = 1.0f;
  std::vector<int32_t> only(static_cast<size_t>(n), -1);
  only[5] = targets[5];
  const double weighted = run(&one_hot).first;
  std::swap(targets, only);
  const double single = run(nullptr).first;
  EXPECT_NEAR(weighted, single, 1e-12);
  EXPECT_GT(single, 0.0);
}

}  // namespace
}  // namespace anvil::model
