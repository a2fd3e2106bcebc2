// Packed T0/MTF batches (model/train/mtf_batch.h) against Megatron-DeepSpeed's
// finetune_t0_non_causal_decoder.py get_batch_pipe, transcribed here from the fork:
//   tokens = row[:-1], labels = row[1:], loss_mask = ~is_inputs[1:] * (tokens != pad),
//   attention_mask (get_packed_attention_mask, is_causal False) =
//     (tril | is_inputs[i] & is_inputs[j]) & (seg[i] != 0) & (seg[j] != 0) & (seg[i] == seg[j]),
//   position_ids = arange(T).
// - decode_mtf_record on rows packed by io/mtf_packing (random pairs, full rows, padding): the
//   targets are the labels exactly where the fork's loss mask is 1, positions arange;
// - the masks: the CPU unfused attention op (ops/attention.h) with the decoded segments and
//   prefix_end gives probabilities > 0 exactly where the fork's dense mask is 1, for every real
//   query; no real query gives weight to padding;
// - the trainer's wiring: evaluate() on MTF records equals a forward of the fork's tokens over
//   the fork's loss mask (targets only), and differs when the inputs' labels are counted too or
//   when the mask is plain causal; a changed target token changes the loss;
// - records pack_samples cannot write are refused naming the sample.
#include "model/train/mtf_batch.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "gtest/gtest.h"
#include "io/mtf_packing.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/trainer.h"
#include "ops/attention.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

constexpr int32_t kPad = 3;

// A packed row (L = T + 1 tokens) of random pairs drawn until the next does not fit; with
// `full` the last pair fills the row exactly.
io::MtfRow random_row(std::mt19937& rng, int64_t T, int32_t vocab, bool full) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  int64_t used = 0;
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1), len(1, 4);
  while (true) {
    const int64_t ni = len(rng), nt = len(rng);
    const int64_t left = T + 1 - used;
    if (ni + nt > left) {
      if (full && left >= 2) {  // a last pair of left - 1 inputs and 1 target
        pairs.emplace_back();
        for (int64_t t = 0; t < left - 1; ++t) pairs.back().first.push_back(tok(rng));
        pairs.back().second.push_back(tok(rng));
      } else if (full && left == 1) {  // one more target
        pairs.back().second.push_back(tok(rng));
      }
      break;
    }
    pairs.emplace_back();
    for (int64_t t = 0; t < ni; ++t) pairs.back().first.push_back(tok(rng));
    for (int64_t t = 0; t < nt; ++t) pairs.back().second.push_back(tok(rng));
    used += ni + nt;
  }
  auto row = io::pack_mtf_row(pairs, T + 1, kPad);
  EXPECT_TRUE(row.ok()) << row.status();
  return *row;
}

std::vector<int32_t> record_of(const io::MtfRow& r, int64_t T) {
  std::vector<int32_t> rec(static_cast<size_t>(mtf_record_width(T)));
  const MtfRecord m = mtf_record(rec.data(), T);
  for (int64_t t = 0; t <= T; ++t) {
    m.tokens[t] = r.tokens[static_cast<size_t>(t)];
    m.segment_ids[t] = r.segment_ids[static_cast<size_t>(t)];
    m.is_inputs[t] = r.is_inputs[static_cast<size_t>(t)];
  }
  return rec;
}

// The fork's loss mask and dense attention mask of a row.
bool fork_loss(const io::MtfRow& r, int64_t t) {
  return !r.is_inputs[static_cast<size_t>(t + 1)] && r.tokens[static_cast<size_t>(t)] != kPad;
}
bool fork_visible(const io::MtfRow& r, int64_t i, int64_t j) {
  const auto s = [&](int64_t k) { return r.segment_ids[static_cast<size_t>(k)]; };
  const auto in = [&](int64_t k) { return r.is_inputs[static_cast<size_t>(k)] != 0; };
  return (j <= i || (in(i) && in(j))) && s(i) != 0 && s(j) != 0 && s(i) == s(j);
}

struct Decoded {
  std::vector<int32_t> tokens, targets, positions, segments, prefix_end;
  int64_t counted = 0;
};
Decoded decode(const io::MtfRow& r, int64_t T, int64_t vocab) {
  Decoded d;
  for (auto* v : {&d.tokens, &d.targets, &d.positions, &d.segments, &d.prefix_end}) {
    v->assign(static_cast<size_t>(T), -7);
  }
  MtfBatchOptions o;
  o.vocab_size = vocab;
  o.pad_token = kPad;
  const std::vector<int32_t> rec = record_of(r, T);
  d.counted = decode_mtf_record(o, 0, T, rec.data(), d.tokens.data(), d.targets.data(),
                                d.positions.data(), d.segments.data(), d.prefix_end.data());
  return d;
}

TEST(MtfBatch, TargetsAndPositionsAreTheForks) {
  std::mt19937 rng(5);
  const int64_t T = 15;
  for (int n = 0; n < 40; ++n) {
    SCOPED_TRACE(n);
    const io::MtfRow r = random_row(rng, T, 40, n % 2 == 0);
    const Decoded d = decode(r, T, 40);
    int64_t counted = 0;
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(d.tokens[t], r.tokens[t]);
      EXPECT_EQ(d.positions[t], t);
      EXPECT_EQ(d.targets[t], fork_loss(r, t) ? r.tokens[t + 1] : -1) << "at " << t;
      counted += fork_loss(r, t);
    }
    EXPECT_EQ(d.counted, counted);
  }
}

// The decoded segments and prefix ends through the unfused CPU attention: probabilities > 0
// exactly where the fork's dense mask is 1 (real queries); padding keys get no weight.
TEST(MtfBatch, UnfusedAttentionMaskIsTheForksDenseMask) {
  std::mt19937 rng(11);
  const int64_t B = 6, T = 15, H = 2, Dh = 4;
  std::vector<io::MtfRow> rows;
  std::vector<int32_t> seg, pe;
  for (int64_t b = 0; b < B; ++b) {
    rows.push_back(random_row(rng, T, 40, b % 3 == 0));
    const Decoded d = decode(rows.back(), T, 40);
    seg.insert(seg.end(), d.segments.begin(), d.segments.end());
    pe.insert(pe.end(), d.prefix_end.begin(), d.prefix_end.end());
  }
  testing::TestStream stream(engine::Device::kCpu);
  testing::TensorPool pool(engine::Device::kCpu);
  ops::AttentionArgs a{B, T, H, Dh, 0.5f};
  a.prefix_end = pool.from_i32(pe, {B * T});
  const std::vector<float> x = testing::random_uniform(B * T * 3 * H * Dh, 3, -1.5f, 1.5f);
  engine::TensorView qkv = pool.from(x, engine::DType::kF64, {B * T, 3 * H * Dh});
  engine::TensorView out = pool.empty(engine::DType::kF64, {B * T, H * Dh});
  engine::TensorView probs = pool.empty(engine::DType::kF64, {B, H, T, T});
  ops::attention_forward(a, out, probs, qkv, pool.from_i32(seg, {B * T}), {}, stream.get());
  stream.get().synchronize();
  const std::vector<double> p = testing::to_host_f64(probs);
  int64_t bidirectional = 0;
  for (int64_t b = 0; b < B; ++b) {
    const io::MtfRow& r = rows[static_cast<size_t>(b)];
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        const bool real = r.segment_ids[i] != 0;
        for (int64_t j = 0; j < T; ++j) {
          const double v = p[static_cast<size_t>(((b * H + h) * T + i) * T + j)];
          if (real) {
            EXPECT_EQ(v > 0.0, fork_visible(r, i, j)) << b << " " << i << " " << j;
            bidirectional += j > i && fork_visible(r, i, j);
          } else if (r.segment_ids[j] != 0) {
            EXPECT_EQ(v, 0.0) << "padding query " << i << " sees real key " << j;
          }
        }
      }
    }
  }
  EXPECT_GT(bidirectional, 0) << "the rows must have inputs that see later inputs";
}

TrainConfig tiny_config(int64_t T, int64_t B) {
  TrainConfig cfg;
  cfg.model.vocab_size = 40;
  cfg.model.max_seq_len = 16;
  cfg.model.d_model = 32;
  cfg.model.n_heads = 2;
  cfg.model.n_layers = 2;
  cfg.model.position_embedding = PositionEmbedding::kAlibi;
  cfg.data.seq_len = T;
  cfg.data.mtf = true;
  cfg.data.pad_token = kPad;
  cfg.train.micro_batch = B;
  cfg.train.global_batch = B;  // one evaluation = one micro-batch
  cfg.train.steps = 2;
  cfg.train.seed = 7;
  cfg.train.device = "cpu";
  cfg.train.eval_iters = 1;
  cfg.optim.schedule.lr = 1e-2;
  cfg.optim.schedule.warmup_steps = 1;
  cfg.optim.schedule.decay_steps = 2;
  return cfg;
}

// The loss of a forward of rows' tokens with the fork's segments / prefix ends, counting the
// labels where `count(row, t)`, divided by their number.
template <typename Count>
double forward_loss(Trainer& tr, const std::vector<io::MtfRow>& rows, int64_t T, Count count,
                    bool packed_mask = true) {
  std::vector<int32_t> tokens, positions, targets, segments, prefix_end;
  int64_t counted = 0;
  for (const io::MtfRow& r : rows) {
    for (int64_t t = 0; t < T; ++t) {
      tokens.push_back(r.tokens[t]);
      positions.push_back(static_cast<int32_t>(t));
      const bool c = count(r, t);
      targets.push_back(c ? r.tokens[t + 1] : -1);
      counted += c;
      segments.push_back(r.segment_ids[t]);
      // The fork's inputs: the pair's first token + its inputs (here from the raw row).
      int64_t s = t;
      while (s > 0 && r.segment_ids[s - 1] == r.segment_ids[t]) --s;
      int64_t e = s;
      while (r.segment_ids[t] != 0 && e <= T && r.segment_ids[e] == r.segment_ids[t] &&
             r.is_inputs[e])
        ++e;
      prefix_end.push_back(static_cast<int32_t>(e));
    }
  }
  GptModel& m = gpt_model(tr.model());
  GptBatch batch{tokens.data(), positions.data(), targets.data(),
                 packed_mask ? segments.data() : nullptr};
  if (packed_mask) batch.prefix_end = prefix_end.data();
  m.forward(batch, /*train=*/false, 0, tr.stream());
  return m.loss_sum(tr.stream()) / static_cast<double>(counted);
}

TEST(MtfBatch, TrainerLossIsOnTargetsOnly) {
  const Precision prec{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  const int64_t T = 15, B = 4;
  std::mt19937 rng(3);
  std::vector<io::MtfRow> rows;
  for (int64_t b = 0; b < B; ++b) rows.push_back(random_row(rng, T, 40, b == 1));
  const TrainConfig cfg = tiny_config(T, B);
  const SampleFn samples = [&rows, T](int64_t index, int32_t* out) {
    const std::vector<int32_t> rec = record_of(rows.at(static_cast<size_t>(index % 4)), T);
    std::copy(rec.begin(), rec.end(), out);
  };
  auto trainer = Trainer::create(cfg, prec, samples, samples);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  Trainer& tr = **trainer;
  const double got = tr.evaluate();
  const double want = forward_loss(tr, rows, T, fork_loss);
  EXPECT_NEAR(got, want, 1e-12 * want);
  // Counting the inputs' labels too, or the plain causal mask, gives other losses.
  const double with_inputs =
      forward_loss(tr, rows, T, [](const io::MtfRow& r, int64_t t) { return r.tokens[t] != kPad; });
  EXPECT_GT(std::abs(with_inputs - got), 1e-6 * got);
  const double causal = forward_loss(tr, rows, T, fork_loss, /*packed_mask=*/false);
  EXPECT_GT(std::abs(causal - got), 1e-6 * got);
  // Row 1 is full: its last token is a target label only; changing it changes the loss.
  ASSERT_NE(rows[1].segment_ids[T], 0);
  ASSERT_EQ(rows[1].is_inputs[T], 0);
  rows[1].tokens[T] = (rows[1].tokens[T] + 1) % 40;
  if (rows[1].tokens[T] == kPad) rows[1].tokens[T] = 4;
  EXPECT_GT(std::abs(tr.evaluate() - got), 1e-9 * got);
  const StepStats st = tr.step();
  EXPECT_TRUE(std::isfinite(st.loss) && st.grad_norm > 0.0);
}

TEST(MtfBatchDeathTest, RefusesRecordsPackSamplesCannotWrite) {
  const int64_t T = 5;
  // tokens | segment_ids | is_inputs, L = 6: an input after a target of the same pair.
  std::vector<int32_t> rec = {5, 6, 7, 8, 3, 3, 1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0};
  std::vector<int32_t> a(T), b(T), c(T), d(T), e(T);
  MtfBatchOptions o;
  o.vocab_size = 40;
  o.pad_token = kPad;
  EXPECT_DEATH(
      decode_mtf_record(o, 17, T, rec.data(), a.data(), b.data(), c.data(), d.data(), e.data()),
      "MTF sample 17");
  rec[12 + 2] = 0;  // fixed; now a segment id that jumps
  rec[6 + 3] = 3;
  EXPECT_DEATH(
      decode_mtf_record(o, 18, T, rec.data(), a.data(), b.data(), c.data(), d.data(), e.data()),
      "MTF sample 18");
}

}  // namespace
}  // namespace anvil::model
