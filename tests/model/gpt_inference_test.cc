// GptInference and Generator (model/infer/gpt_inference.h, model/infer/generation.h) on a tiny
// random GPT, on the CPU (f32) and, when a GPU is present, on CUDA (bf16; skipped cleanly
// otherwise):
//   - prefill logits of right-padded prompts of different lengths equal GptModel's evaluation
//     forward logits (train = false) at each prompt's last position, for the same weights
//     (loaded from the master tensors GptModel would checkpoint);
//   - with forced tokens, every decode step's logits (three prompts of different lengths
//     batched in one cache, some steps decoding only some slots) equal a fresh prefill of that
//     prompt + tokens alone (f32 rounding on the CPU, bf16 tolerance on CUDA);
//   - on the CPU, generation with the KV cache gives exactly the tokens of recomputing the whole
//   sequence
//     each step without a cache (a fresh prefill of prompt + output so far), greedy and sampled
//     with a fixed seed;
//   - prompts of different lengths batched together (more requests than slots, so later ones
//     join as slots free up) give the tokens of each prompt alone;
//   - concurrent requests from several threads through the GenerationScheduler (one batch per
//     step) give each request's tokens alone; a cancelled request ends without harming others;
//   - echo with logprobs: each prompt token's log-probability (and the top 3) equals
//     log_softmax of GptModel's forward logits at the position before it; the output tokens
//     of an echo request equal those of the same request without echo, a greedy token's
//     logprob is its top alternative's, and an EOD that ends a request is scored too;
//   - the memory plan's KV cache is layers * batch * max_len * 2 * d elements;
//   - bad prompts, slots and checkpoint tensors are InvalidArgument / NotFound naming them.
#include "model/infer/gpt_inference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "model/infer/generation.h"
#include "model/infer/generation_scheduler.h"
#include "model/stack/gpt.h"
#include "model/train/checkpoint.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

constexpr int64_t kVocab = 50;  // padded to 128
constexpr int64_t kMaxLen = 24;

// GPT-2, and the BLOOM (ALiBi, embedding LayerNorm) and LLaMA (rotary, RMSNorm, SwiGLU, no
// biases, untied head) architectures of model/stack/gpt.h.
// kQwenGqa: LLaMA with grouped-query attention (4 heads on 2 kv heads), a bias on c_attn alone
// and llama3 rope scaling; kLlamaMqa: multi-query (2 heads on 1 kv head), linear rope scaling.
enum class Arch { kGpt2, kBloom, kLlama, kQwenGqa, kLlamaMqa };

struct Case {
  Device device;
  Arch arch;
};

GptConfig tiny_config(Arch arch) {
  GptConfig c;
  c.vocab_size = kVocab;
  c.max_seq_len = kMaxLen;
  c.d_model = 128;  // head_dim 64: what the CUDA flash attention takes
  c.n_heads = 2;
  c.n_layers = 2;
  c.init_std = 0.1f;  // spread-out logits: no near-ties between the top tokens
  if (arch == Arch::kBloom) {
    c.position_embedding = PositionEmbedding::kAlibi;
    c.embed_layernorm = true;
  } else {
    c.position_embedding = PositionEmbedding::kRotary;
    c.activation = Activation::kSwiglu;
    c.norm = Norm::kRmsNorm;
    c.bias = false;
    c.tie_embeddings = false;
  }
  if (arch == Arch::kQwenGqa) {
    c.d_model = 256;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.qkv_bias = true;
    c.rope_scaling.type = ops::RotaryScalingType::kLlama3;
    c.rope_scaling.factor = 4.0f;
    c.rope_scaling.original_max_position = 16;  // all three frequency bands at head_dim 64
  } else if (arch == Arch::kLlamaMqa) {
    c.n_kv_heads = 1;
    c.rope_scaling.type = ops::RotaryScalingType::kLinear;
    c.rope_scaling.factor = 2.0f;
  }
  return c;
}

Precision precision(Device d) {
  return d == Device::kCuda ? Precision{d, DType::kBF16, DType::kF32}
                            : Precision{d, DType::kF32, DType::kF32};
}

// The master tensors of a freshly initialized GptModel, as a checkpoint would hold them.
std::map<std::string, engine::HostSlice> reference_weights(GptModel& m, engine::Stream& s) {
  std::map<std::string, engine::HostSlice> out;
  for (engine::HostSlice& t : gpt_checkpoint_slices(m, 0, s)) out[t.tensor] = std::move(t);
  return out;
}

TensorLookup lookup_of(const std::map<std::string, engine::HostSlice>& w) {
  return [&w](const std::string& name) -> absl::StatusOr<engine::HostSlice> {
    auto it = w.find(name);
    if (it == w.end()) return absl::NotFoundError("no tensor " + name);
    return it->second;
  };
}

// Token-for-token comparisons of two paths need equal logits up to f32 rounding; bf16 paths
// with other batch shapes may flip a near-tie, so on CUDA the logits test above stands for them.
constexpr char kTokenExactOnCpu[] =
    "token-exact comparisons run on the CPU; on CUDA, "
    "CachedLogitsMatchRecomputeAndBatchedMatchAlone "
    "compares the same paths' logits";

class GptInferenceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().device == Device::kCuda && !testing::gpu_available())
      GTEST_SKIP() << "no CUDA device";
    stream_ = std::make_unique<testing::TestStream>(GetParam().device);
    auto ref = GptModel::create(tiny_config(GetParam().arch), GptRunShape{3, 8},
                                precision(GetParam().device), 11);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ref_ = std::move(ref).value();
    weights_ = reference_weights(*ref_, *stream_);
    // Initialization leaves biases 0: give c_attn's (Qwen2's only bias) values, in both models.
    bool biased = false;
    for (auto& [name, t] : weights_) {
      if (name.find("attn.c_attn.bias") == std::string::npos) continue;
      t.data = testing::random_uniform(static_cast<int64_t>(t.data.size()), 77);
      for (float& v : t.data) v *= 0.5f;
      biased = true;
    }
    if (biased) {
      ASSERT_TRUE(gpt_load_checkpoint(*ref_, lookup_of(weights_), true, *stream_).ok());
    }
  }
  std::unique_ptr<GptInference> make(int64_t max_batch) {
    auto m = GptInference::create(tiny_config(GetParam().arch), {max_batch, kMaxLen},
                                  precision(GetParam().device));
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return nullptr;
    EXPECT_TRUE((*m)->load(lookup_of(weights_), *stream_).ok());
    return std::move(m).value();
  }
  // Generates each request alone, recomputing prompt + output without reusing a cache.
  std::vector<int32_t> recompute(const GenerationRequest& r) {
    std::unique_ptr<GptInference> m = make(1);
    Sampler sampler(r.sampling);
    std::vector<int32_t> seq = r.prompt, out;
    for (int64_t k = 0; k < r.max_new_tokens && static_cast<int64_t>(seq.size()) < kMaxLen; ++k) {
      std::vector<float> logits;
      EXPECT_TRUE(m->prefill({0}, {seq}, &logits, *stream_).ok());
      const int32_t t = sampler.next(logits, seq);
      seq.push_back(t);
      out.push_back(t);
    }
    return out;
  }
  std::unique_ptr<testing::TestStream> stream_;
  std::unique_ptr<GptModel> ref_;
  std::map<std::string, engine::HostSlice> weights_;
};

TEST_P(GptInferenceTest, PrefillMatchesGptModelLogits) {
  const int64_t B = 3, T = 8;
  const std::vector<int64_t> lens = {8, 5, 1};
  std::vector<int32_t> tokens = testing::random_ints(B * T, 3, 0, kVocab);
  std::vector<int32_t> positions, targets(B * T, -1);
  for (int64_t i = 0; i < B * T; ++i) positions.push_back(static_cast<int32_t>(i % T));
  ref_->forward(tokens.data(), positions.data(), targets.data(), false, 0, *stream_);
  const std::vector<float> ref = testing::to_host(ref_->last_logits());  // [B*T, 128]

  std::unique_ptr<GptInference> m = make(4);
  ASSERT_NE(m, nullptr);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < B; ++b) {
    prompts.emplace_back(tokens.begin() + b * T, tokens.begin() + b * T + lens[b]);
  }
  std::vector<float> got;
  ASSERT_TRUE(m->prefill({2, 0, 3}, prompts, &got, *stream_).ok());
  ASSERT_EQ(got.size(), static_cast<size_t>(B * kVocab));
  std::vector<float> want;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row = b * T + lens[b] - 1;
    want.insert(want.end(), ref.begin() + row * 128, ref.begin() + row * 128 + kVocab);
  }
  // CPU: the same f32 ops; CUDA: GptModel keeps bf16 logits, inference f32 ones.
  const testing::Tol tol = GetParam().device == Device::kCpu ? testing::Tol{1e-5, 1e-5, 1e-10}
                                                             : testing::Tol{3e-2, 2e-2, 1e-3};
  EXPECT_TRUE(testing::tensors_near(got, want, tol));
  EXPECT_EQ(m->length(2), 8);
  EXPECT_EQ(m->length(0), 5);
  EXPECT_EQ(m->length(1), 0);
}

// The logits tolerance between two paths: f32 rounding on the CPU; on CUDA bf16 activations
// rounded after GEMMs whose kernels differ with the number of rows.
testing::Tol path_tol(Device d) {
  return d == Device::kCpu ? testing::Tol{1e-4, 1e-4, 1e-9} : testing::Tol{6e-2, 5e-2, 2e-3};
}

TEST_P(GptInferenceTest, CachedLogitsMatchRecomputeAndBatchedMatchAlone) {
  // Three prompts of different lengths in one cache, then 8 forced tokens each, decoded
  // together (at steps 2 and 5 only slots 0 and 2: the idle slot must not change); each step's
  // logits against a fresh prefill of that prompt + forced tokens so far, alone.
  const std::vector<int64_t> lens = {3, 7, 5};
  const int64_t steps = 8;
  std::vector<std::vector<int32_t>> prompts, forced;
  for (size_t i = 0; i < lens.size(); ++i) {
    prompts.push_back(testing::random_ints(lens[i], 60 + i, 0, kVocab));
    forced.push_back(testing::random_ints(steps, 70 + i, 0, kVocab));
  }
  std::unique_ptr<GptInference> m = make(3), one = make(1);
  ASSERT_NE(m, nullptr);
  ASSERT_NE(one, nullptr);
  auto alone = [&](size_t i, int64_t k) {  // logits after prompt i + forced[i][:k]
    std::vector<int32_t> seq = prompts[i];
    seq.insert(seq.end(), forced[i].begin(), forced[i].begin() + k);
    std::vector<float> l;
    EXPECT_TRUE(one->prefill({0}, {seq}, &l, *stream_).ok());
    return l;
  };
  std::vector<float> got;
  ASSERT_TRUE(m->prefill({0, 1, 2}, prompts, &got, *stream_).ok());
  for (size_t i = 0; i < lens.size(); ++i) {
    const std::vector<float> row(got.begin() + i * kVocab, got.begin() + (i + 1) * kVocab);
    EXPECT_TRUE(testing::tensors_near(row, alone(i, 0), path_tol(GetParam().device)))
        << "prompt " << i;
  }
  std::vector<int64_t> done(lens.size(), 0);
  for (int64_t step = 0; step < steps + 2; ++step) {
    std::vector<int64_t> slots = {0, 1, 2};
    if (step == 2 || step == 5) slots = {0, 2};
    std::vector<int64_t> use;
    std::vector<int32_t> tokens;
    for (int64_t sl : slots) {
      if (done[static_cast<size_t>(sl)] == steps) continue;
      use.push_back(sl);
      tokens.push_back(forced[static_cast<size_t>(sl)][static_cast<size_t>(done[sl])]);
    }
    if (use.empty()) break;
    ASSERT_TRUE(m->decode(use, tokens, &got, *stream_).ok());
    for (size_t j = 0; j < use.size(); ++j) {
      const size_t i = static_cast<size_t>(use[j]);
      const int64_t k = ++done[i];
      EXPECT_EQ(m->length(use[j]), lens[i] + k);
      const std::vector<float> row(got.begin() + j * kVocab, got.begin() + (j + 1) * kVocab);
      EXPECT_TRUE(testing::tensors_near(row, alone(i, k), path_tol(GetParam().device)))
          << "prompt " << i << " after " << k << " forced tokens";
    }
  }
  EXPECT_EQ(done, std::vector<int64_t>(lens.size(), steps));
}

std::vector<GenerationRequest> requests(bool greedy) {
  std::vector<GenerationRequest> rs;
  const std::vector<int64_t> lens = {3, 7, 5, 2}, news = {10, 6, 12, 9};
  for (size_t i = 0; i < lens.size(); ++i) {
    GenerationRequest r;
    r.prompt = testing::random_ints(lens[i], 40 + i, 0, kVocab);
    r.max_new_tokens = news[i];
    if (!greedy) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 20;
      r.sampling.top_p = 0.95f;
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.seed = 100 + i;
    } else {
      r.sampling.greedy = true;
    }
    rs.push_back(r);
  }
  return rs;
}

TEST_P(GptInferenceTest, KvCacheMatchesRecomputeAndBatchingMatchesAlone) {
  if (GetParam().device == Device::kCuda) GTEST_SKIP() << kTokenExactOnCpu;
  for (bool greedy : {true, false}) {
    SCOPED_TRACE(greedy ? "greedy" : "sampled");
    const std::vector<GenerationRequest> rs = requests(greedy);
    // Two slots for four requests: the later ones join while others still run.
    std::unique_ptr<GptInference> m = make(2);
    ASSERT_NE(m, nullptr);
    Generator gen(*m, /*eod=*/-1, nullptr);
    std::vector<std::vector<int32_t>> batched;
    auto events = generate_all(gen, rs, &batched, *stream_);
    ASSERT_TRUE(events.ok()) << events.status();
    for (size_t i = 0; i < rs.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(static_cast<int64_t>(batched[i].size()), rs[i].max_new_tokens);
      EXPECT_EQ((*events)[i].finished, FinishReason::kLength);
      EXPECT_EQ(batched[i], recompute(rs[i]));
      // Alone, through the cache.
      std::unique_ptr<GptInference> one = make(1);
      Generator g1(*one, -1, nullptr);
      std::vector<std::vector<int32_t>> alone;
      ASSERT_TRUE(generate_all(g1, {rs[i]}, &alone, *stream_).ok());
      EXPECT_EQ(batched[i], alone[0]);
    }
  }
}

TEST_P(GptInferenceTest, StopsAtEodAndAtTheContext) {
  if (GetParam().device == Device::kCuda) GTEST_SKIP() << kTokenExactOnCpu;
  std::unique_ptr<GptInference> m = make(1);
  ASSERT_NE(m, nullptr);
  GenerationRequest r = requests(true)[0];
  r.max_new_tokens = 100;
  const std::vector<int32_t> free_run = recompute(r);  // stops at the context: 24 - 3 tokens
  EXPECT_EQ(free_run.size(), static_cast<size_t>(kMaxLen - 3));
  Generator gen(*m, /*eod=*/free_run[4], nullptr);  // the 5th token ends the text
  std::vector<std::vector<int32_t>> out;
  auto ev = generate_all(gen, {r}, &out, *stream_);
  ASSERT_TRUE(ev.ok()) << ev.status();
  // The first occurrence of that id ends it (it may come before the 5th position).
  size_t first = 0;
  while (free_run[first] != free_run[4]) ++first;
  EXPECT_EQ(out[0], std::vector<int32_t>(free_run.begin(), free_run.begin() + first));
  EXPECT_EQ((*ev)[0].finished, FinishReason::kStop);
  Generator g2(*m, -1, nullptr);
  ASSERT_TRUE(generate_all(g2, {r}, &out, *stream_).ok());
  EXPECT_EQ(out[0], free_run);
}

TEST_P(GptInferenceTest, EchoScoresThePromptAsAForward) {
  const bool cpu = GetParam().device == Device::kCpu;
  const int64_t T = 8;
  const std::vector<int32_t> prompt = testing::random_ints(T, 21, 0, kVocab);
  std::vector<int32_t> positions(T), targets(T, -1), pad(T * 3, 0);
  std::copy(prompt.begin(), prompt.end(), pad.begin());
  for (int64_t i = 0; i < T; ++i) positions[i] = static_cast<int32_t>(i);
  std::vector<int32_t> pos3, tg3(T * 3, -1);
  for (int64_t i = 0; i < 3 * T; ++i) pos3.push_back(static_cast<int32_t>(i % T));
  ref_->forward(pad.data(), pos3.data(), tg3.data(), false, 0, *stream_);
  const std::vector<float> ref = testing::to_host(ref_->last_logits());  // [3*T, 128]

  GenerationRequest r;
  r.prompt = prompt;
  r.max_new_tokens = 4;
  r.sampling.greedy = true;
  r.logprobs = 3;
  GenerationRequest echo = r;
  echo.echo = true;
  std::unique_ptr<GptInference> m = make(2);
  ASSERT_NE(m, nullptr);
  Generator gen(*m, -1, nullptr);
  std::vector<GenerationEvent> events;
  std::vector<std::vector<int32_t>> out;
  ASSERT_TRUE(generate_all(gen, {echo, r}, &out, *stream_, [&](const GenerationEvent& e) {
                events.push_back(e);
              }).ok());
  if (cpu) {
    EXPECT_EQ(out[0], out[1]);  // echo changes what is fed, not what is generated
  }
  int64_t scored = 0, generated = 0;
  for (const GenerationEvent& e : events) {
    if (e.id != 0) continue;
    ASSERT_EQ(e.top.size(), 3u);
    if (e.prompt_token) {  // prompt[p + 1] given prompt[0 .. p]
      const int64_t p = scored++;
      ASSERT_EQ(e.token, prompt[static_cast<size_t>(p + 1)]);
      const float* row = ref.data() + p * 128;
      double mx = -1e30, sum = 0.0;
      for (int64_t v = 0; v < kVocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      for (int64_t v = 0; v < kVocab; ++v) sum += std::exp(row[v] - mx);
      const double want = row[e.token] - mx - std::log(sum);
      EXPECT_NEAR(e.logprob, want, cpu ? 1e-4 : 5e-2) << "prompt token " << p + 1;
      std::vector<int32_t> order(kVocab);
      for (int32_t v = 0; v < kVocab; ++v) order[v] = v;
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      if (cpu) {
        for (size_t k = 0; k < 3; ++k)
          EXPECT_EQ(e.top[k].first, order[k]) << "prompt token " << p + 1;
      }
      EXPECT_GE(e.top[0].second, e.logprob - 1e-12);
    } else if (e.has_token) {
      ++generated;
      EXPECT_EQ(e.top[0].first, e.token);  // greedy: the most likely token
      EXPECT_NEAR(e.top[0].second, e.logprob, 1e-12);
      EXPECT_LT(e.logprob, 0.0);
    }
  }
  EXPECT_EQ(scored, T - 1);
  EXPECT_EQ(generated, 4);

  // A request ended by EOD (here: its greedy first token) still scores that token.
  if (!cpu) return;
  Generator stops(*m, /*eod=*/out[1][0], nullptr);
  events.clear();
  ASSERT_TRUE(generate_all(stops, {r}, &out, *stream_, [&](const GenerationEvent& e) {
                events.push_back(e);
              }).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].eod_token);
  EXPECT_EQ(events[0].finished, FinishReason::kStop);
  EXPECT_EQ(events[0].token, events[0].top[0].first);
  EXPECT_NEAR(events[0].logprob, events[0].top[0].second, 1e-12);
}

// Tokens of a scheduler job, to its end.
std::vector<int32_t> drain(GenerationScheduler::Job& job) {
  std::vector<int32_t> out;
  GenerationEvent e;
  while (job.next(&e)) {
    if (e.has_token) out.push_back(e.token);
  }
  return out;
}

TEST_P(GptInferenceTest, SchedulerBatchesConcurrentRequestsLikeAlone) {
  if (GetParam().device == Device::kCuda) GTEST_SKIP() << kTokenExactOnCpu;
  const std::vector<GenerationRequest> rs = requests(false);
  std::vector<std::vector<int32_t>> alone(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) alone[i] = recompute(rs[i]);
  std::unique_ptr<GptInference> m = make(3);
  ASSERT_NE(m, nullptr);
  Generator gen(*m, -1, nullptr);
  std::vector<std::vector<int32_t>> got(rs.size());
  {
    GenerationScheduler sched(gen, *stream_);
    // A request cancelled at once ends without failing the others.
    GenerationRequest long_one = rs[0];
    long_one.max_new_tokens = 20;
    std::shared_ptr<GenerationScheduler::Job> gone = sched.submit(long_one);
    gone->cancel();
    std::vector<std::thread> clients;
    for (size_t i = 0; i < rs.size(); ++i) {
      clients.emplace_back([&, i] { got[i] = drain(*sched.submit(rs[i])); });
    }
    for (std::thread& t : clients) t.join();
    drain(*gone);
    const absl::Status st = gone->status();
    EXPECT_TRUE(st.ok() || absl::IsCancelled(st)) << st;
    // The scheduler still serves afterwards.
    EXPECT_EQ(drain(*sched.submit(rs[1])), alone[1]);
  }
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(got[i], alone[i]) << "request " << i;
}

TEST_P(GptInferenceTest, BadInputsAreErrors) {
  std::unique_ptr<GptInference> m = make(2);
  ASSERT_NE(m, nullptr);
  std::vector<float> logits;
  auto msg = [](const absl::Status& s) { return std::string(s.message()); };
  absl::Status s = m->prefill({0}, {{}}, &logits, *stream_);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(msg(s).find("prompt 0 has 0 tokens"), std::string::npos) << s;
  s = m->prefill({0}, {std::vector<int32_t>(kMaxLen + 1, 1)}, &logits, *stream_);
  EXPECT_NE(msg(s).find("has 25 tokens"), std::string::npos) << s;
  s = m->prefill({0}, {{1, kVocab}}, &logits, *stream_);
  EXPECT_NE(msg(s).find("token id 50 outside the vocabulary"), std::string::npos) << s;
  s = m->prefill({0, 0}, {{1}, {2}}, &logits, *stream_);
  EXPECT_NE(msg(s).find("slot 0 is outside [0, 2) or given twice"), std::string::npos) << s;
  s = m->decode({1}, {3}, &logits, *stream_);
  EXPECT_NE(msg(s).find("decoding needs a prefilled slot"), std::string::npos) << s;
  Generator gen(*m, -1, nullptr);
  GenerationRequest r;
  r.prompt = {1, 2};
  r.stop = {"x"};
  auto ev = gen.start({{7, r}}, *stream_);
  EXPECT_NE(msg(ev.status()).find("request 7: stop strings need a tokenizer"), std::string::npos);

  // A tensor every architecture has, missing; one with the wrong shape.
  std::map<std::string, engine::HostSlice> w = weights_;
  w.erase("master/h.1.mlp.c_fc.weight");
  s = m->load(lookup_of(w), *stream_);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  w = weights_;
  w["master/h.0.attn.c_proj.weight"].shape = {64, 128};
  s = m->load(lookup_of(w), *stream_);
  const int64_t d = tiny_config(GetParam().arch).d_model;
  EXPECT_NE(msg(s).find(absl::StrCat("master/h.0.attn.c_proj.weight has shape [64, 128], the model "
                                     "needs [",
                                     d, ", ", d, "]")),
            std::string::npos)
      << s;
}

TEST_P(GptInferenceTest, PlanSizesTheKvCache) {
  const GptConfig c = tiny_config(GetParam().arch);
  auto plan = GptInference::plan(c, {3, 0}, precision(GetParam().device));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const size_t elem = GetParam().device == Device::kCuda ? 2 : 4;
  const size_t kv =
      static_cast<size_t>(c.n_layers * 3 * c.max_seq_len * 2 * c.kv_heads() * c.head_dim()) * elem;
  EXPECT_EQ(plan->category_bytes("kv_cache"), engine::align_up(kv));
  EXPECT_FALSE(GptInference::plan(c, {1, kMaxLen + 1}, precision(GetParam().device)).ok());
  EXPECT_FALSE(GptInference::plan(c, {0, 4}, precision(GetParam().device)).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Devices, GptInferenceTest,
    ::testing::Values(Case{Device::kCpu, Arch::kGpt2}, Case{Device::kCuda, Arch::kGpt2},
                      Case{Device::kCpu, Arch::kBloom}, Case{Device::kCuda, Arch::kBloom},
                      Case{Device::kCpu, Arch::kLlama}, Case{Device::kCuda, Arch::kLlama},
                      Case{Device::kCpu, Arch::kQwenGqa}, Case{Device::kCuda, Arch::kQwenGqa},
                      Case{Device::kCpu, Arch::kLlamaMqa}, Case{Device::kCuda, Arch::kLlamaMqa}),
    [](const ::testing::TestParamInfo<Case>& i) {
      const char* arch = i.param.arch == Arch::kGpt2       ? "Gpt2"
                         : i.param.arch == Arch::kBloom    ? "Bloom"
                         : i.param.arch == Arch::kQwenGqa  ? "QwenGqa"
                         : i.param.arch == Arch::kLlamaMqa ? "LlamaMqa"
                                                           : "Llama";
      return std::string(arch) + (i.param.device == Device::kCpu ? "Cpu" : "Cuda");
    });

}  // namespace
}  // namespace anvil::model
