// Tests of zero-shot evaluation (model/tasks/eval_tasks.h).
// Windows: Megatron's _LMDataset arithmetic on the hand-worked case of 10 tokens, seq_len 4,
// stride 2 (which target is counted in which window), stride = seq_len (disjoint windows), and
// bad arguments. evaluate_lm: on a random tiny model, the loss sum equals one independently
// computed from a forward per window with micro-batch 1, whose target mask the test builds
// itself (a target counts in the first window that reaches it); batching across windows and
// the padded last micro-batch change nothing. evaluate_cloze: a tiny model overfit to four
// token sentences predicts their last two tokens (accuracy 1, low target loss); with the
// targets rotated among the sentences it predicts none (accuracy 0); truncation of a long
// context and the argument errors. GPU: the same random model (initialization is identical on
// both devices) on CUDA in bf16 gives the CPU's evaluate_lm loss and evaluate_cloze target loss
// within bf16 tolerance; examples whose target is the CPU model's own greedy next token (found by
// a direct forward and ops::row_argmax: all correct through evaluate_cloze on the CPU, none with
// the target shifted, a CPU test of the packing) are at least 90% correct on the GPU
// (random-model logits have near-ties that bf16 may flip); the last micro-batch is partial.
#include "model/tasks/eval_tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "ops/argmax.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

struct Window {
  std::vector<int32_t> in, targets;
};

Window window(const LmWindows& w, int64_t i, const std::vector<int32_t>& tokens, int32_t pad) {
  Window out{std::vector<int32_t>(w.seq_len()), std::vector<int32_t>(w.seq_len())};
  w.fill(i, tokens, pad, out.in.data(), out.targets.data());
  return out;
}

TEST(LmWindows, HandWorkedOverlappingExample) {
  // Tokens 100..109 (N = 10: 9 targets), T = 4, stride 2, pad 7.
  std::vector<int32_t> tok;
  for (int i = 0; i < 10; ++i) tok.push_back(100 + i);
  auto w = LmWindows::create(10, 4, 2);
  ASSERT_TRUE(w.ok()) << w.status();
  // Megatron: total_sequences = ceil((9 - 2) / 2) + 1 = 5.
  ASSERT_EQ(w->count(), 5);
  const int32_t x = -1;
  // Window 0: inputs 100-103, counts targets 101-104 (all four).
  EXPECT_EQ(window(*w, 0, tok, 7).in, (std::vector<int32_t>{100, 101, 102, 103}));
  EXPECT_EQ(window(*w, 0, tok, 7).targets, (std::vector<int32_t>{101, 102, 103, 104}));
  // Window 1 (start 2): inputs 102-105, counts only its last two targets, 105 and 106.
  EXPECT_EQ(window(*w, 1, tok, 7).in, (std::vector<int32_t>{102, 103, 104, 105}));
  EXPECT_EQ(window(*w, 1, tok, 7).targets, (std::vector<int32_t>{x, x, 105, 106}));
  // Window 2 (start 4): 107, 108.
  EXPECT_EQ(window(*w, 2, tok, 7).targets, (std::vector<int32_t>{x, x, 107, 108}));
  // Window 3 (start 6): inputs 106-109; targets 109 and one past the end (padding).
  EXPECT_EQ(window(*w, 3, tok, 7).in, (std::vector<int32_t>{106, 107, 108, 109}));
  EXPECT_EQ(window(*w, 3, tok, 7).targets, (std::vector<int32_t>{x, x, 109, x}));
  // Window 4 (start 8): inputs 108, 109 then padding; counts nothing (Megatron runs it too).
  EXPECT_EQ(window(*w, 4, tok, 7).in, (std::vector<int32_t>{108, 109, 7, 7}));
  EXPECT_EQ(window(*w, 4, tok, 7).targets, (std::vector<int32_t>{x, x, x, x}));
}

TEST(LmWindows, DisjointWhenStrideIsSeqLen) {
  std::vector<int32_t> tok = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto w = LmWindows::create(10, 4, 4);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->count(), 3);  // targets 1-4, 5-8, 9
  EXPECT_EQ(window(*w, 1, tok, 0).targets, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(window(*w, 2, tok, 0).in, (std::vector<int32_t>{8, 9, 0, 0}));
  EXPECT_EQ(window(*w, 2, tok, 0).targets, (std::vector<int32_t>{9, -1, -1, -1}));
  // Fewer tokens than one window: one window.
  auto one = LmWindows::create(3, 4, 2);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->count(), 1);
}

TEST(LmWindows, BadArguments) {
  EXPECT_FALSE(LmWindows::create(1, 4, 2).ok());  // no target
  EXPECT_FALSE(LmWindows::create(10, 4, 0).ok());
  EXPECT_FALSE(LmWindows::create(10, 4, 5).ok());  // stride > seq_len would skip targets
  EXPECT_FALSE(LmWindows::create(10, 0, 1).ok());
}

GptConfig tiny_config() {
  GptConfig cfg;
  cfg.vocab_size = 29;
  cfg.max_seq_len = 8;
  cfg.d_model = 32;
  cfg.n_heads = 4;
  cfg.n_layers = 2;
  return cfg;
}

TEST(EvaluateLm, EqualsPerWindowForwardsWithTestBuiltMasks) {
  const GptConfig cfg = tiny_config();
  const int64_t T = 8, stride = 3, n_tok = 50;
  const std::vector<int32_t> tok = testing::random_ints(n_tok, 9, 0, 29);
  engine::Stream s = engine::Stream::cpu();

  // Reference: micro-batch 1, one forward per window; the mask from "first window reaching a
  // target counts it", independent of LmWindows.
  auto ref_model = GptModel::create(cfg, {1, T}, {}, /*seed=*/5);
  ASSERT_TRUE(ref_model.ok()) << ref_model.status();
  double ref_sum = 0.0;
  int64_t ref_counted = 0, covered = 0;  // targets 1..covered counted so far
  std::vector<int32_t> pos(T);
  for (int64_t j = 0; j < T; ++j) pos[j] = static_cast<int32_t>(j);
  for (int64_t start = 0; covered < n_tok - 1; start += stride) {
    std::vector<int32_t> in(T, 3), tg(T, -1);
    for (int64_t j = 0; j < T; ++j) {
      const int64_t t = start + j + 1;  // the target's index in tok
      if (start + j < n_tok) in[j] = tok[start + j];
      if (t < n_tok && t > covered) tg[j] = tok[t];
    }
    covered = std::min<int64_t>(start + T, n_tok - 1);
    for (int32_t t : tg) ref_counted += t >= 0;
    (*ref_model)->forward(in.data(), pos.data(), tg.data(), false, 0, s);
    ref_sum += (*ref_model)->loss_sum(s);
  }
  ASSERT_EQ(ref_counted, n_tok - 1);

  // Micro-batch 3: windows packed three at a time, the last micro-batch partly padding.
  auto model = GptModel::create(cfg, {3, T}, {}, /*seed=*/5);
  ASSERT_TRUE(model.ok());
  int64_t calls = 0;
  auto r =
      evaluate_lm(**model, {3, T}, tok, stride, /*pad=*/3, s, {}, [&](int64_t done, int64_t total) {
        ++calls;
        EXPECT_LE(done, total);
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counted, n_tok - 1);
  EXPECT_EQ(r->windows, 17);  // ceil((49 - 3) / 3) + 1
  EXPECT_EQ(calls, 6);        // ceil(17 / 3)
  EXPECT_NEAR(r->loss_sum, ref_sum, 1e-5 * ref_sum);

  const LmReport rep = lm_report(*r, /*original_words=*/11);
  EXPECT_NEAR(rep.loss, ref_sum / 49, 1e-6);
  EXPECT_NEAR(rep.ppl, std::exp(ref_sum / 49), 1e-4 * rep.ppl);
  EXPECT_NEAR(rep.token_ratio, 49.0 / 10.0, 1e-12);  // Megatron: (N - 1) / (W - 1)
  EXPECT_NEAR(rep.adjusted_ppl, std::exp(std::min(20.0, ref_sum / 10)), 1e-4 * rep.adjusted_ppl);
  EXPECT_TRUE(std::isnan(lm_report(*r, 0).adjusted_ppl));

  // Bad ids are refused, naming the position.
  std::vector<int32_t> bad = tok;
  bad[7] = 29;
  auto e = evaluate_lm(**model, {3, T}, bad, stride, 3, s);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("token 7 is id 29"), std::string::npos);
}

// Four 8-token sentences over a 29-token vocabulary; the last two tokens of each are distinct
// from every other sentence's.
std::vector<std::vector<int32_t>> sentences() {
  return {{1, 2, 3, 4, 5, 6, 20, 21},
          {7, 8, 9, 10, 11, 12, 22, 23},
          {13, 14, 15, 16, 17, 18, 24, 25},
          {2, 4, 6, 8, 10, 12, 26, 27}};
}

// A model of micro-batch 4, seq_len 7 trained until it reproduces every sentence.
std::unique_ptr<GptModel> overfit(engine::Stream& s) {
  const GptConfig cfg = tiny_config();
  auto created = GptModel::create(cfg, {4, 7}, {}, /*seed=*/42);
  EXPECT_TRUE(created.ok()) << created.status();
  std::unique_ptr<GptModel> m = std::move(*created);
  std::vector<int32_t> in, tg, pos;
  for (const auto& sent : sentences()) {
    in.insert(in.end(), sent.begin(), sent.end() - 1);
    tg.insert(tg.end(), sent.begin() + 1, sent.end());
    for (int j = 0; j < 7; ++j) pos.push_back(j);
  }
  const int64_t n = static_cast<int64_t>(in.size());
  for (int step = 0; step < 300; ++step) {
    m->zero_grads(s);
    m->forward(in.data(), pos.data(), tg.data(), true, step, s);
    if (m->loss_sum(s) / n < 0.02) break;
    m->backward(1.0f / n, s);
    m->optimizer_step({1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step + 1}, s);
  }
  return m;
}

TEST(EvaluateCloze, OverfitModelPredictsItsSentencesAndNotRotatedTargets) {
  engine::Stream s = engine::Stream::cpu();
  std::unique_ptr<GptModel> m = overfit(s);
  const auto sent = sentences();
  std::vector<ClozeExample> right, rotated;
  for (size_t i = 0; i < sent.size(); ++i) {
    const auto& a = sent[i];
    const auto& b = sent[(i + 1) % sent.size()];
    right.push_back({{a.begin(), a.end() - 2}, {a.end() - 2, a.end()}});
    rotated.push_back({{a.begin(), a.end() - 2}, {b.end() - 2, b.end()}});
  }
  // Micro-batch 4 but 3 examples per call too (a padded row).
  auto r = evaluate_cloze(*m, {4, 7}, right, /*pad=*/0, s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->correct, 4);
  EXPECT_EQ(r->total, 4);
  EXPECT_DOUBLE_EQ(r->accuracy(), 1.0);
  EXPECT_EQ(r->target_tokens, 8);
  EXPECT_LT(r->target_loss_sum / 8, 0.1);
  EXPECT_EQ(r->truncated, 0);

  auto w = evaluate_cloze(*m, {4, 7}, rotated, 0, s);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->correct, 0);
  EXPECT_EQ(w->total, 4);
  EXPECT_GT(w->target_loss_sum / 8, 2.0);

  // Only the last target token wrong: still incorrect (every target token must match).
  std::vector<ClozeExample> half = {right[0]};
  half[0].target[1] = 27;
  auto h = evaluate_cloze(*m, {4, 7}, half, 0, s);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->correct, 0);
  EXPECT_EQ(h->total, 1);

  // A context longer than seq_len + 1 - target loses its front tokens, counted.
  std::vector<ClozeExample> longer = {right[1]};
  longer[0].context.insert(longer[0].context.begin(), {5, 5, 5});
  auto t = evaluate_cloze(*m, {4, 7}, longer, 0, s);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->truncated, 1);
  EXPECT_EQ(t->correct, 1);  // the kept 6 context tokens are the sentence's own

  // Bad examples.
  EXPECT_FALSE(evaluate_cloze(*m, {4, 7}, {{{}, {3}}}, 0, s).ok());
  EXPECT_FALSE(evaluate_cloze(*m, {4, 7}, {{{1}, {}}}, 0, s).ok());
  EXPECT_FALSE(evaluate_cloze(*m, {4, 7}, {{{1}, {1, 2, 3, 4, 5, 6, 7, 8}}}, 0, s).ok());
  EXPECT_FALSE(evaluate_cloze(*m, {4, 7}, {{{1}, {29}}}, 0, s).ok());
}

// 38 examples of 1-7 random context tokens (vocabulary 300 padded to 384) whose one target
// token is `m`'s greedy next token, found by a direct forward (micro-batch 3, seq_len 8) and
// ops::row_argmax over its logits.
std::vector<ClozeExample> own_greedy_examples(GptModel& m, engine::Stream& s) {
  std::vector<ClozeExample> ex;
  std::vector<int32_t> pos, pred(3 * 8);
  for (int j = 0; j < 3 * 8; ++j) pos.push_back(j % 8);
  for (int i = 0; i < 39; i += 3) {
    std::vector<int32_t> in(3 * 8, 0), tg(3 * 8, -1);
    std::vector<std::vector<int32_t>> ctx;
    for (int b = 0; b < 3; ++b) {
      ctx.push_back(testing::random_ints(1 + (i + b) % 7, 100 + i + b, 0, 300));
      std::copy(ctx[b].begin(), ctx[b].end(), in.begin() + b * 8);
    }
    m.forward(in.data(), pos.data(), tg.data(), false, 0, s);
    ops::row_argmax(
        {3 * 8, 300, 384},
        engine::make_view(pred.data(), engine::DType::kI32, engine::Device::kCpu, {3 * 8}),
        m.last_logits(), s);
    for (int b = 0; b < 3; ++b) {
      const int64_t last = b * 8 + static_cast<int64_t>(ctx[b].size()) - 1;
      ex.push_back({ctx[b], {pred[static_cast<size_t>(last)]}});
    }
  }
  ex.pop_back();  // the last micro-batch of evaluate_cloze holds two
  return ex;
}

GptConfig vocab300_config() {
  GptConfig cfg = tiny_config();
  cfg.vocab_size = 300;  // padded to 384: the argmax must skip the padding columns
  return cfg;
}

TEST(EvaluateCloze, PositionsMatchADirectForward) {
  engine::Stream s = engine::Stream::cpu();
  auto m = GptModel::create(vocab300_config(), {3, 8}, {}, 77);
  ASSERT_TRUE(m.ok());
  std::vector<ClozeExample> ex = own_greedy_examples(**m, s);
  auto r = evaluate_cloze(**m, {3, 8}, ex, 0, s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->correct, 38);
  for (ClozeExample& e : ex) e.target[0] = (e.target[0] + 1) % 300;
  auto w = evaluate_cloze(**m, {3, 8}, ex, 0, s);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->correct, 0);
}

TEST(EvalTasksGpu, Bf16MatchesCpu) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GptConfig cfg = vocab300_config();
  const GptRunShape shape{3, 8};
  const std::vector<int32_t> tok = testing::random_ints(200, 4, 0, 300);
  engine::Stream cpu_s = engine::Stream::cpu();
  auto cpu_m = GptModel::create(cfg, shape, {}, 77);
  ASSERT_TRUE(cpu_m.ok());
  const std::vector<ClozeExample> ex = own_greedy_examples(**cpu_m, cpu_s);
  auto cs = engine::Stream::cuda(0);
  ASSERT_TRUE(cs.ok()) << cs.status();
  auto gpu_m = GptModel::create(
      cfg, shape, {engine::Device::kCuda, engine::DType::kBF16, engine::DType::kF32}, 77);
  ASSERT_TRUE(gpu_m.ok()) << gpu_m.status();

  auto lc = evaluate_lm(**cpu_m, shape, tok, 3, 0, cpu_s);
  auto lg = evaluate_lm(**gpu_m, shape, tok, 3, 0, *cs);
  ASSERT_TRUE(lc.ok() && lg.ok());
  EXPECT_EQ(lg->counted, lc->counted);
  EXPECT_NEAR(lg->loss_sum, lc->loss_sum, 1e-2 * lc->loss_sum);

  auto cc = evaluate_cloze(**cpu_m, shape, ex, 0, cpu_s);
  auto cg = evaluate_cloze(**gpu_m, shape, ex, 0, *cs);
  ASSERT_TRUE(cc.ok() && cg.ok());
  EXPECT_EQ(cc->correct, 38);
  EXPECT_EQ(cg->total, 38);
  EXPECT_EQ(cg->target_tokens, cc->target_tokens);
  EXPECT_NEAR(cg->target_loss_sum, cc->target_loss_sum, 1e-2 * cc->target_loss_sum);
  EXPECT_GE(cg->correct, 34);
}

}  // namespace
}  // namespace anvil::model
