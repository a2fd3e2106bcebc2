// T5 samples (io/t5_dataset) against the transcription of Megatron's
// t5_dataset.build_training_sample (and of Hugging Face's random_spans_noise_mask for the
// optional noise) in scripts/make_bert_t5_fixture.py, field for field; invariants over many
// samples: the encoder input and the labels rebuild the original tokens with the same sentinels
// in the same order, nothing exceeds its length, the noise share and span lengths; the errors.
#include "io/t5_dataset.h"

#include <string>

#include "gtest/gtest.h"
#include "io/data_split.h"
#include "tests/io/bert_t5_fixture.h"

namespace anvil::io {
namespace {

using testing::bert_t5_array;
using testing::bert_t5_case;
using testing::bert_t5_cases;
using testing::bert_t5_data;
using testing::bert_t5_prefix;
using testing::bert_t5_vocab;
using testing::row_equals;
using testing::ScratchDir;

std::unique_ptr<T5Dataset> open_case(const std::string& mapping_case, T5DatasetOptions opt,
                                     const std::string& cache_dir) {
  const auto m = bert_t5_case("mapping", mapping_case);
  opt.num_samples = std::stoll(m[4]);
  opt.short_seq_prob = std::stod(m[6]);
  opt.cache.cache_dir = cache_dir;
  auto ds = T5Dataset::create(bert_t5_data(), bert_t5_prefix(), std::stoll(m[2]), std::stoll(m[3]),
                              bert_t5_vocab(100), opt);
  EXPECT_TRUE(ds.ok()) << ds.status();
  return ds.ok() ? std::move(*ds) : nullptr;
}

void expect_case_matches(const std::string& name, const std::string& mapping_case,
                         const T5DatasetOptions& opt, int64_t rows) {
  SCOPED_TRACE(name);
  ScratchDir dir;
  auto ds = open_case(mapping_case, opt, dir.path());
  ASSERT_NE(ds, nullptr);
  ASSERT_EQ(ds->size(), rows);
  const NpyArray enc = bert_t5_array(name + "_enc");
  const NpyArray dec = bert_t5_array(name + "_dec_in");
  const NpyArray labels = bert_t5_array(name + "_labels");
  const NpyArray loss_mask = bert_t5_array(name + "_loss_mask");
  const NpyArray enc_valid = bert_t5_array(name + "_enc_valid");
  const NpyArray dec_valid = bert_t5_array(name + "_dec_valid");
  const NpyArray truncated = bert_t5_array(name + "_truncated");
  T5Sample s;
  int64_t cut = 0;
  for (int64_t i = 0; i < ds->size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(ds->sample(i, &s).ok());
    ASSERT_TRUE(row_equals(enc, i, s.enc_tokens));
    ASSERT_TRUE(row_equals(dec, i, s.dec_tokens));
    ASSERT_TRUE(row_equals(labels, i, s.labels));
    ASSERT_TRUE(row_equals(loss_mask, i, s.loss_mask));
    // Megatron's masks are outer products of (token >= 1): the same vectors here.
    ASSERT_TRUE(row_equals(enc_valid, i, s.enc_padding_mask));
    ASSERT_TRUE(row_equals(dec_valid, i, s.dec_padding_mask));
    ASSERT_EQ(s.truncated, truncated[i]);
    cut += s.truncated;
  }
  EXPECT_GT(cut, 0);
}

TEST(T5Dataset, SamplesMatchMegatron) {
  // "t5 case mapping max_seq_length max_seq_length_dec masked_lm_prob seed rows"
  for (const auto& c : bert_t5_cases("t5")) {
    T5DatasetOptions opt;
    opt.max_seq_length = std::stoi(c[3]);
    opt.max_seq_length_dec = std::stoi(c[4]);
    opt.masked_lm_prob = std::stod(c[5]);
    opt.seed = std::stoi(c[6]);
    expect_case_matches(c[1], c[2], opt, std::stoll(c[7]));
  }
}

TEST(T5Dataset, RandomSpansMatchHuggingFace) {
  // "t5_spans case mapping max_seq_length max_seq_length_dec density mean_span seed rows"
  for (const auto& c : bert_t5_cases("t5_spans")) {
    T5DatasetOptions opt;
    opt.noise = T5Noise::kRandomSpans;
    opt.max_seq_length = std::stoi(c[3]);
    opt.max_seq_length_dec = std::stoi(c[4]);
    opt.masked_lm_prob = std::stod(c[5]);
    opt.mean_noise_span_length = std::stod(c[6]);
    opt.seed = std::stoi(c[7]);
    expect_case_matches(c[1], c[2], opt, std::stoll(c[8]));
  }
}

struct Tally {
  int64_t tokens = 0, noise = 0, spans = 0, samples = 0;
};

// Checks one sample against its source tokens; adds to the tally.
void check_sample(const T5Sample& s, const std::vector<int32_t>& source, int32_t target,
                  const MlmVocab& vocab, const T5DatasetOptions& opt, Tally* t) {
  ASSERT_EQ(s.enc_tokens.size(), static_cast<size_t>(opt.max_seq_length));
  ASSERT_EQ(s.dec_tokens.size(), static_cast<size_t>(opt.max_seq_length_dec));
  ASSERT_EQ(s.labels.size(), s.dec_tokens.size());
  ASSERT_EQ(s.dec_tokens[0], vocab.bos);
  int64_t ne = 0, nd = 0;
  while (ne < opt.max_seq_length && s.enc_padding_mask[ne]) ++ne;
  while (nd < opt.max_seq_length_dec && s.dec_padding_mask[nd]) ++nd;
  for (int64_t k = ne; k < opt.max_seq_length; ++k) ASSERT_EQ(s.enc_tokens[k], vocab.pad);
  for (int64_t k = nd; k < opt.max_seq_length_dec; ++k) {
    ASSERT_EQ(s.dec_tokens[k], vocab.pad);
    ASSERT_EQ(s.labels[k], -1);
    ASSERT_EQ(s.loss_mask[k], 0);
  }
  // Labels are the decoder input shifted left, ending with [EOS].
  for (int64_t k = 0; k + 1 < nd; ++k) ASSERT_EQ(s.labels[k], s.dec_tokens[k + 1]);
  ASSERT_EQ(s.labels[nd - 1], vocab.eos);
  // Rebuild the source: each encoder sentinel k is replaced by the label tokens after sentinel
  // k; sentinels appear in order 0, 1, ... in both.
  auto sentinel_index = [&](int32_t tok) -> int64_t {
    for (size_t k = 0; k < vocab.sentinels.size(); ++k) {
      if (vocab.sentinels[k] == tok) return static_cast<int64_t>(k);
    }
    return -1;
  };
  std::vector<std::vector<int32_t>> span_tokens;
  for (int64_t k = 0; k < nd - 1; ++k) {
    const int64_t si = sentinel_index(s.labels[k]);
    if (si >= 0) {
      ASSERT_EQ(si, static_cast<int64_t>(span_tokens.size()));
      span_tokens.emplace_back();
    } else {
      ASSERT_FALSE(span_tokens.empty()) << "labels start without a sentinel";
      span_tokens.back().push_back(s.labels[k]);
    }
  }
  std::vector<int32_t> rebuilt;
  int64_t next = 0;
  for (int64_t k = 0; k < ne; ++k) {
    const int64_t si = sentinel_index(s.enc_tokens[k]);
    if (si < 0) {
      rebuilt.push_back(s.enc_tokens[k]);
      continue;
    }
    ASSERT_EQ(si, next++);
    ASSERT_FALSE(span_tokens[si].empty());
    rebuilt.insert(rebuilt.end(), span_tokens[si].begin(), span_tokens[si].end());
  }
  ASSERT_EQ(next, static_cast<int64_t>(span_tokens.size()));
  // The row's tokens cut to its target.
  const std::vector<int32_t> want(
      source.begin(),
      source.begin() + std::min<size_t>(source.size(), static_cast<size_t>(target)));
  ASSERT_EQ(rebuilt, want);
  ++t->samples;
  t->tokens += static_cast<int64_t>(want.size());
  t->spans += next;
  for (const auto& sp : span_tokens) t->noise += static_cast<int64_t>(sp.size());
}

Tally run_invariants(T5Noise noise) {
  T5DatasetOptions opt;
  opt.noise = noise;
  opt.max_seq_length = 128;
  opt.max_seq_length_dec = 128;
  opt.num_samples = 10;
  opt.cache.use_cache = false;
  auto data = bert_t5_data();
  auto ds =
      T5Dataset::create(data, bert_t5_prefix(), 0, data->num_documents(), bert_t5_vocab(100), opt);
  EXPECT_TRUE(ds.ok()) << ds.status();
  Tally t;
  if (!ds.ok()) return t;
  const SentenceMapping& m = (*ds)->mapping();
  std::vector<std::vector<int32_t>> sentences;
  T5Sample s;
  for (int rep = 0; rep < 30; ++rep) {
    for (int64_t i = 0; i < m.size(); ++i) {
      EXPECT_TRUE(read_sentences(*data, m.start(i), m.end(i), &sentences).ok());
      std::vector<int32_t> source;
      for (const auto& x : sentences) source.insert(source.end(), x.begin(), x.end());
      NumpyRandomState rng(static_cast<uint32_t>(7919 * rep + i));
      const absl::Status st =
          build_t5_sample(sentences, m.target(i), opt, (*ds)->vocab(), &rng, &s);
      EXPECT_TRUE(st.ok()) << st;
      check_sample(s, source, m.target(i), (*ds)->vocab(), opt, &t);
      if (::testing::Test::HasFatalFailure()) return t;
    }
  }
  return t;
}

TEST(T5Dataset, MegatronNoiseInvariants) {
  const Tally t = run_invariants(T5Noise::kMegatron);
  ASSERT_GT(t.samples, 1000);
  EXPECT_NEAR(static_cast<double>(t.noise) / t.tokens, 0.15, 0.02);
  // Whole words of Geometric(0.2) clipped at 10 words: spans of several tokens.
  EXPECT_GT(static_cast<double>(t.noise) / t.spans, 2.0);
}

TEST(T5Dataset, RandomSpansInvariants) {
  const Tally t = run_invariants(T5Noise::kRandomSpans);
  ASSERT_GT(t.samples, 1000);
  EXPECT_NEAR(static_cast<double>(t.noise) / t.tokens, 0.15, 0.02);
  EXPECT_NEAR(static_cast<double>(t.noise) / t.spans, 3.0, 0.5);
}

TEST(T5Dataset, EndToEndFromPreprocessedText) {
  ScratchDir dir;
  MlmVocab vocab;
  const std::string prefix = testing::preprocess_english(dir, 100, &vocab);
  auto data = IndexedDataset::open(prefix);
  ASSERT_TRUE(data.ok()) << data.status();
  std::shared_ptr<const IndexedDataset> shared(std::move(*data));
  auto splits = split_documents("90,5,5", shared->num_documents());
  ASSERT_TRUE(splits.ok()) << splits.status();
  for (const T5Noise noise : {T5Noise::kMegatron, T5Noise::kRandomSpans}) {
    T5DatasetOptions opt;
    opt.noise = noise;
    opt.num_samples = 300;
    opt.max_seq_length = 48;
    opt.max_seq_length_dec = 32;
    opt.cache.cache_dir = dir.path();
    auto ds =
        T5Dataset::create(shared, prefix, (*splits)[0].first, (*splits)[0].second, vocab, opt);
    ASSERT_TRUE(ds.ok()) << ds.status();
    ASSERT_GE((*ds)->size(), 300);
    const SentenceMapping& m = (*ds)->mapping();
    std::vector<std::vector<int32_t>> sentences;
    T5Sample s;
    Tally t;
    for (int64_t i = 0; i < (*ds)->size(); ++i) {
      ASSERT_TRUE((*ds)->sample(i, &s).ok());
      EXPECT_TRUE(read_sentences(*shared, m.start(i), m.end(i), &sentences).ok());
      std::vector<int32_t> source;
      for (const auto& x : sentences) source.insert(source.end(), x.begin(), x.end());
      check_sample(s, source, m.target(i), vocab, opt, &t);
      if (HasFatalFailure()) return;
    }
    EXPECT_NEAR(static_cast<double>(t.noise) / t.tokens, 0.15, 0.03);
  }
}

TEST(T5Dataset, Errors) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  T5DatasetOptions opt;
  opt.num_samples = 10;
  opt.max_seq_length = 64;
  opt.max_seq_length_dec = 40;
  opt.cache.use_cache = false;
  // No sentinels (Megatron: "Provide the argument --vocab-extra-ids 100").
  auto ds = T5Dataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(0), opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  EXPECT_NE(ds.status().message().find("vocab_extra_ids"), std::string::npos);
  // Too few for the longest sample: floor(0.15 * 62) = 9 spans.
  ds = T5Dataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(8), opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  ds = T5Dataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(9), opt);
  EXPECT_TRUE(ds.ok()) << ds.status();
  opt.max_seq_length_dec = 1;
  ds = T5Dataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(100), opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  opt.max_seq_length_dec = 40;
  opt.noise = T5Noise::kRandomSpans;
  opt.mean_noise_span_length = 0.5;
  ds = T5Dataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(100), opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  // A decoder too short for a sample: an error, not a crash (Megatron asserts).
  opt.noise = T5Noise::kMegatron;
  opt.max_seq_length_dec = 3;
  ds = T5Dataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(100), opt);
  ASSERT_TRUE(ds.ok()) << ds.status();
  T5Sample s;
  int64_t errors = 0;
  for (int64_t i = 0; i < (*ds)->size(); ++i) {
    const absl::Status st = (*ds)->sample(i, &s);
    if (!st.ok()) {
      EXPECT_TRUE(absl::IsOutOfRange(st)) << st;
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace anvil::io
