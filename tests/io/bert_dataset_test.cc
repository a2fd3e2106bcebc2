// BERT samples (io/bert_dataset) against the transcription of Megatron's
// bert_dataset.build_training_sample in scripts/make_bert_t5_fixture.py, field for field, for
// every sample of several cases; and invariants over many samples: the masked share, the
// 80/10/10 replacement split, whole words masked together, the layout and the lengths.
#include "io/bert_dataset.h"

#include <algorithm>
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

// The mapping case's document range and num_samples, from cases.txt.
std::unique_ptr<BertDataset> open_case(const std::string& mapping_case, BertDatasetOptions opt,
                                       const std::string& cache_dir) {
  const auto m = bert_t5_case("mapping", mapping_case);
  opt.num_samples = std::stoll(m[4]);
  opt.short_seq_prob = std::stod(m[6]);
  opt.cache.cache_dir = cache_dir;
  auto ds = BertDataset::create(bert_t5_data(), bert_t5_prefix(), std::stoll(m[2]),
                                std::stoll(m[3]), bert_t5_vocab(0), opt);
  EXPECT_TRUE(ds.ok()) << ds.status();
  return ds.ok() ? std::move(*ds) : nullptr;
}

TEST(BertDataset, SamplesMatchMegatron) {
  ScratchDir dir;
  // "bert case mapping max_seq_length masked_lm_prob seed binary_head rows"
  for (const auto& c : bert_t5_cases("bert")) {
    SCOPED_TRACE(c[1]);
    BertDatasetOptions opt;
    opt.max_seq_length = std::stoi(c[3]);
    opt.masked_lm_prob = std::stod(c[4]);
    opt.seed = std::stoi(c[5]);
    opt.binary_head = c[6] == "1";
    auto ds = open_case(c[2], opt, dir.path());
    ASSERT_NE(ds, nullptr);
    ASSERT_EQ(ds->size(), std::stoll(c[7]));
    const NpyArray text = bert_t5_array(c[1] + "_text");
    const NpyArray types = bert_t5_array(c[1] + "_types");
    const NpyArray labels = bert_t5_array(c[1] + "_labels");
    const NpyArray loss_mask = bert_t5_array(c[1] + "_loss_mask");
    const NpyArray padding_mask = bert_t5_array(c[1] + "_padding_mask");
    const NpyArray is_random = bert_t5_array(c[1] + "_is_random");
    const NpyArray truncated = bert_t5_array(c[1] + "_truncated");
    int64_t masked = 0, swapped = 0, cut = 0;
    BertSample s;
    for (int64_t i = 0; i < ds->size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_TRUE(ds->sample(i, &s).ok());
      ASSERT_TRUE(row_equals(text, i, s.tokens));
      ASSERT_TRUE(row_equals(types, i, s.types));
      ASSERT_TRUE(row_equals(labels, i, s.labels));
      ASSERT_TRUE(row_equals(loss_mask, i, s.loss_mask));
      ASSERT_TRUE(row_equals(padding_mask, i, s.padding_mask));
      ASSERT_EQ(s.is_random, is_random[i]);
      ASSERT_EQ(s.truncated, truncated[i]);
      for (int32_t m : s.loss_mask) masked += m;
      swapped += s.is_random;
      cut += s.truncated;
    }
    // The fixture exercises what it should.
    EXPECT_GT(masked, ds->size());
    if (opt.binary_head) {
      EXPECT_GT(swapped, 0);
    }
    EXPECT_GT(cut, 0);
  }
}

// Statistics of many samples of a larger configuration.
struct Tally {
  int64_t tokens = 0;   // real tokens other than [CLS]/[SEP]
  int64_t masked = 0;   // loss_mask positions
  int64_t as_mask = 0;  // replaced by [MASK]
  int64_t kept = 0;     // unchanged
  int64_t random = 0;   // another id
  int64_t samples = 0;
};

TEST(BertDataset, MaskingInvariants) {
  ScratchDir dir;
  BertDatasetOptions opt;
  opt.max_seq_length = 128;
  opt.seed = 99;
  auto ds = open_case("bert_nobin", opt, dir.path());  // binary head on, over all documents
  ASSERT_NE(ds, nullptr);
  const MlmVocab& vocab = ds->vocab();
  const auto data = bert_t5_data();
  Tally t;
  BertSample s;
  std::vector<std::vector<int32_t>> sentences;
  // Many draws: every row with 40 seeds each.
  for (int rep = 0; rep < 40; ++rep) {
    for (int64_t i = 0; i < ds->size(); ++i) {
      const SentenceMapping& m = ds->mapping();
      EXPECT_TRUE(read_sentences(*data, m.start(i), m.end(i), &sentences).ok());
      if (sentences.size() < 2) continue;
      NumpyRandomState rng(static_cast<uint32_t>(1000 * rep + i + 1));
      build_bert_sample(sentences, m.target(i), opt.max_seq_length, vocab, 0.15, true, &rng, &s);
      ++t.samples;
      // Layout: [CLS] A [SEP] B [SEP] then padding; types 0 then 1; nothing over the length.
      ASSERT_EQ(s.tokens.size(), 128u);
      int64_t n = 0;
      while (n < 128 && s.padding_mask[n] == 1) ++n;
      for (int64_t k = n; k < 128; ++k) {
        ASSERT_EQ(s.padding_mask[k], 0);
        ASSERT_EQ(s.tokens[k], vocab.pad);
        ASSERT_EQ(s.loss_mask[k], 0);
        ASSERT_EQ(s.labels[k], -1);
      }
      ASSERT_LE(n - 3, m.target(i));
      ASSERT_EQ(s.tokens[0], vocab.cls);
      ASSERT_EQ(s.tokens[n - 1], vocab.sep);
      int64_t seps = 0, type_switches = 0;
      for (int64_t k = 0; k < n; ++k) {
        seps += s.tokens[k] == vocab.sep && s.loss_mask[k] == 0;
        if (k > 0 && s.types[k] != s.types[k - 1]) ++type_switches;
      }
      ASSERT_EQ(seps, 2);
      ASSERT_EQ(type_switches, 1);
      // Masking: labels where loss_mask, never on [CLS]/[SEP]; whole words.
      int64_t masked_here = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (s.loss_mask[k] == 0) {
          ASSERT_EQ(s.labels[k], -1);
          if (s.tokens[k] != vocab.cls && s.tokens[k] != vocab.sep) ++t.tokens;
          continue;
        }
        ++t.tokens;
        ++masked_here;
        ASSERT_NE(s.labels[k], vocab.cls);
        ASSERT_NE(s.labels[k], vocab.sep);
        if (s.tokens[k] == vocab.mask) {
          ++t.as_mask;
        } else if (s.tokens[k] == s.labels[k]) {
          ++t.kept;
        } else {
          ++t.random;
        }
        // A masked continuation piece's word start is masked too, and the piece after a
        // masked position is masked when it continues the word.
        if (vocab.continuation[s.labels[k]] && k > 1 && s.tokens[k - 1] != vocab.sep) {
          ASSERT_EQ(s.loss_mask[k - 1], 1) << "sample " << i << " position " << k;
        }
        if (k + 1 < n && s.loss_mask[k + 1] == 0 && s.tokens[k + 1] != vocab.sep) {
          ASSERT_FALSE(vocab.continuation[s.tokens[k + 1]]) << "sample " << i << " position " << k;
        }
      }
      // At most max(1, round(0.15 * n)) and at most 0.15 * target.
      ASSERT_LE(masked_here, std::max<int64_t>(1, std::llround(0.15 * n)));
      ASSERT_LE(masked_here, 0.15 * m.target(i));
      t.masked += masked_here;
    }
  }
  ASSERT_GT(t.samples, 3000);
  const double rate = static_cast<double>(t.masked) / t.tokens;
  EXPECT_NEAR(rate, 0.15, 0.02) << t.masked << " of " << t.tokens;
  const double m = static_cast<double>(t.masked);
  EXPECT_NEAR(t.as_mask / m, 0.8, 0.01);
  EXPECT_NEAR(t.kept / m, 0.1, 0.01);
  // A random id can equal the original (1 in the vocab size), counted as kept.
  EXPECT_NEAR(t.random / m, 0.1, 0.01);
}

TEST(BertDataset, MappingCacheReusedAndKeyedByItsParameters) {
  ScratchDir dir;
  BertDatasetOptions opt;
  opt.max_seq_length = 64;
  auto first = open_case("bert_train", opt, dir.path());
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(first->mapping().loaded_from_cache());
  auto second = open_case("bert_train", opt, dir.path());
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->mapping().loaded_from_cache());
  BertSample a, b;
  EXPECT_TRUE(first->sample(17, &a).ok());
  EXPECT_TRUE(second->sample(17, &b).ok());
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.labels, b.labels);
  // The masking probability is not a mapping input: still the cached mapping.
  opt.masked_lm_prob = 0.2;
  auto other_prob = open_case("bert_train", opt, dir.path());
  ASSERT_NE(other_prob, nullptr);
  EXPECT_TRUE(other_prob->mapping().loaded_from_cache());
  // The sequence length and the binary head are: new mappings.
  opt.max_seq_length = 63;
  auto other_len = open_case("bert_train", opt, dir.path());
  ASSERT_NE(other_len, nullptr);
  EXPECT_FALSE(other_len->mapping().loaded_from_cache());
  opt.max_seq_length = 64;
  opt.binary_head = false;
  auto no_head = open_case("bert_train", opt, dir.path());
  ASSERT_NE(no_head, nullptr);
  EXPECT_FALSE(no_head->mapping().loaded_from_cache());
  EXPECT_NE(no_head->mapping().path(), first->mapping().path());
}

TEST(BertDataset, EndToEndFromPreprocessedText) {
  ScratchDir dir;
  MlmVocab vocab;
  const std::string prefix = testing::preprocess_english(dir, 0, &vocab);
  auto data = IndexedDataset::open(prefix);
  ASSERT_TRUE(data.ok()) << data.status();
  std::shared_ptr<const IndexedDataset> shared(std::move(*data));
  auto splits = split_documents("90,5,5", shared->num_documents());
  ASSERT_TRUE(splits.ok()) << splits.status();
  BertDatasetOptions opt;
  opt.num_samples = 300;
  opt.max_seq_length = 48;
  opt.cache.cache_dir = dir.path();
  auto ds =
      BertDataset::create(shared, prefix, (*splits)[0].first, (*splits)[0].second, vocab, opt);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_GE((*ds)->size(), 300);
  const SentenceMapping& m = (*ds)->mapping();
  std::vector<std::vector<int32_t>> sentences;
  BertSample s;
  int64_t swapped = 0;
  for (int64_t i = 0; i < (*ds)->size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE((*ds)->sample(i, &s).ok());
    EXPECT_TRUE(read_sentences(*shared, m.start(i), m.end(i), &sentences).ok());
    std::vector<int32_t> source;
    for (const auto& x : sentences) source.insert(source.end(), x.begin(), x.end());
    // Undo the masking, then A and B are runs of the row's tokens.
    std::vector<int32_t> restored = s.tokens;
    for (size_t k = 0; k < restored.size(); ++k) {
      if (s.loss_mask[k]) restored[k] = s.labels[k];
    }
    const auto end = restored.begin() + std::count(s.padding_mask.begin(), s.padding_mask.end(), 1);
    ASSERT_EQ(restored[0], vocab.cls);
    ASSERT_EQ(*(end - 1), vocab.sep);
    const auto sep = std::find(restored.begin() + 1, end, vocab.sep);
    ASSERT_LT(sep + 1, end - 1) << "no segment B";
    const std::vector<int32_t> a(restored.begin() + 1, sep), b(sep + 1, end - 1);
    ASSERT_FALSE(a.empty());
    EXPECT_NE(std::search(source.begin(), source.end(), a.begin(), a.end()), source.end());
    EXPECT_NE(std::search(source.begin(), source.end(), b.begin(), b.end()), source.end());
    swapped += s.is_random;
  }
  EXPECT_NEAR(static_cast<double>(swapped) / (*ds)->size(), 0.5, 0.1);
}

TEST(BertDataset, CreateErrors) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  BertDatasetOptions opt;
  opt.num_samples = 10;
  opt.cache.use_cache = false;
  opt.max_seq_length = 4;
  auto ds = BertDataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(0), opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  opt.max_seq_length = 64;
  opt.masked_lm_prob = 1.0;
  ds = BertDataset::create(data, bert_t5_prefix(), 0, 10, bert_t5_vocab(0), opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  // A vocabulary smaller than the data's ids.
  opt.masked_lm_prob = 0.15;
  MlmVocab small = bert_t5_vocab(0);
  small.size = 50;
  small.continuation.resize(50);
  ds = BertDataset::create(data, bert_t5_prefix(), 0, 10, small, opt);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  // Not a WordPiece tokenizer.
  TokenizerOptions byte;
  byte.type = "Byte";
  auto tok = make_tokenizer(byte);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE(absl::IsInvalidArgument(make_mlm_vocab(**tok).status()));
}

}  // namespace
}  // namespace anvil::io
