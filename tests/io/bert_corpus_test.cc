// BERT's train/valid/test datasets of one prefix (io/bert_corpus): the document ranges are
// split_documents' of the split string, a split asked for no samples (or without documents)
// is not built, and each built split is exactly BertDataset::create over its range (same size,
// same samples) with its own cache name; a missing prefix is an error naming it.
// Weighted prefixes (Megatron's blended BERT data): each source's dataset is sized
// ceil(n * w * 1.005), the blend's positions follow the greedy rule recomputed here (so the
// sample counts follow the weights within one sample) and serve the source's own samples in
// order, and every blended sample is a valid BERT sample; a "0,1,0" split is every document
// (valid_paths); weights must be >= 0 and not all 0; a blend whose split lacks documents in
// one source is an error naming it.
#include "io/bert_corpus.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/data_split.h"
#include "io/indexed_dataset.h"
#include "tests/io/bert_t5_fixture.h"

namespace anvil::io {
namespace {

using testing::bert_t5_data;
using testing::bert_t5_prefix;
using testing::bert_t5_vocab;
using testing::ScratchDir;

// Copies of the fixture's data under dir/<name>_text_sentence (distinct prefixes, caches).
std::string copy_fixture(const ScratchDir& dir, const std::string& name) {
  const std::string prefix = dir.path() + "/" + name + "_text_sentence";
  for (const char* ext : {".bin", ".idx"}) {
    testing::write_file(prefix + ext, testing::read_file(bert_t5_prefix() + ext));
  }
  return prefix;
}

// A well-formed BERT sample of length T (Megatron's, with the binary head): the real tokens a
// prefix, [CLS] A [SEP] B [SEP] in the original tokens (the labels where masked), types 0
// through the first [SEP] and 1 after, [PAD] type 0 after, labels exactly where loss_mask.
void expect_valid(const BertSample& s, const MlmVocab& v, int64_t T, int64_t at) {
  ASSERT_EQ(static_cast<int64_t>(s.tokens.size()), T) << at;
  const int64_t len = std::count(s.padding_mask.begin(), s.padding_mask.end(), 1);
  ASSERT_GE(len, 5) << at;
  int64_t seps = 0, masked = 0;
  for (int64_t t = 0; t < T; ++t) {
    const size_t i = static_cast<size_t>(t);
    EXPECT_EQ(s.loss_mask[i] == 1, s.labels[i] >= 0) << at << " " << t;
    EXPECT_TRUE(s.tokens[i] >= 0 && s.tokens[i] < v.size) << at << " " << t;
    if (t >= len) {
      EXPECT_TRUE(s.padding_mask[i] == 0 && s.tokens[i] == v.pad && s.types[i] == 0 &&
                  s.loss_mask[i] == 0)
          << at << " " << t;
      continue;
    }
    const int32_t original = s.loss_mask[i] ? s.labels[i] : s.tokens[i];
    if (t == 0) {
      EXPECT_EQ(original, v.cls) << at;
    }
    EXPECT_EQ(s.types[i], seps >= 1 ? 1 : 0) << at << " " << t;
    seps += original == v.sep;
    masked += s.loss_mask[i];
  }
  EXPECT_EQ(seps, 2) << at;
  EXPECT_EQ(s.tokens[static_cast<size_t>(len - 1)], v.sep) << at;
  EXPECT_LE(masked, len) << at;
  EXPECT_TRUE(s.is_random == 0 || s.is_random == 1) << at;
}

TEST(BertCorpus, SplitsAreBertDatasetsOfTheirDocuments) {
  ScratchDir dir;
  BertDatasetOptions opt;
  opt.max_seq_length = 64;
  opt.cache.cache_dir = dir.path();
  auto splits = open_bert_splits(bert_t5_prefix(), "8,2,0", {40, 10, 5}, bert_t5_vocab(0), opt);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const int64_t docs = bert_t5_data()->num_documents();
  auto want = split_documents("8,2,0", docs);
  ASSERT_TRUE(want.ok());
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(splits->documents[k], (*want)[k]) << k;
  ASSERT_NE(splits->sets[0], nullptr);
  ASSERT_NE(splits->sets[1], nullptr);
  EXPECT_EQ(splits->sets[2], nullptr);  // the test split has no documents
  for (size_t k = 0; k < 2; ++k) {
    SCOPED_TRACE(k);
    BertDatasetOptions o = opt;
    o.num_samples = k == 0 ? 40 : 10;
    o.cache.use_cache = false;
    auto ref = BertDataset::create(bert_t5_data(), bert_t5_prefix(), (*want)[k].first,
                                   (*want)[k].second, bert_t5_vocab(0), o);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_EQ(splits->sets[k]->size(), (*ref)->size());
    EXPECT_GE((*ref)->size(), o.num_samples);
    BertSample a, b;
    for (int64_t i = 0; i < (*ref)->size(); i += 7) {
      EXPECT_TRUE(splits->sets[k]->sample(i, &a).ok());
      EXPECT_TRUE((*ref)->sample(i, &b).ok());
      EXPECT_EQ(a.tokens, b.tokens) << i;
      EXPECT_EQ(a.labels, b.labels) << i;
      EXPECT_EQ(a.is_random, b.is_random) << i;
    }
  }
  // No samples asked for the validation split: not built.
  auto no_valid = open_bert_splits(bert_t5_prefix(), "8,2,0", {40, 0, 0}, bert_t5_vocab(0), opt);
  ASSERT_TRUE(no_valid.ok()) << no_valid.status();
  EXPECT_EQ(no_valid->sets[1], nullptr);
}

TEST(BertCorpus, MissingPrefixIsAnError) {
  auto s = open_bert_splits("/nonexistent/x_text_sentence", "1", {1, 0, 0}, bert_t5_vocab(0), {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find("/nonexistent/x_text_sentence"),
            std::string::npos)
      << s.status();
}

TEST(BertCorpus, WeightedPrefixesBlendByWeight) {
  ScratchDir dir;
  const std::vector<GptDataSource> sources = {{3.0, copy_fixture(dir, "a")},
                                              {1.0, copy_fixture(dir, "b")}};
  BertDatasetOptions opt;
  opt.max_seq_length = 64;
  opt.cache.cache_dir = dir.path();
  const MlmVocab vocab = bert_t5_vocab(0);
  constexpr int64_t kTrain = 200;
  auto c = open_bert_corpus(sources, /*weighted=*/true, "8,2,0", {kTrain, 10, 0}, vocab, opt);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_NE(c->sets[0], nullptr);
  ASSERT_NE(c->sets[1], nullptr);
  EXPECT_EQ(c->sets[2], nullptr);
  const BertSamples& train = *c->sets[0];
  ASSERT_EQ(train.size(), kTrain);
  const double w[2] = {0.75, 0.25};
  std::vector<int64_t> count(2, 0);
  BertSample got, want;
  for (int64_t i = 0; i < kTrain; ++i) {
    // Megatron's build_blending_indices: the dataset whose share lags its weight most.
    size_t d = 0;
    double most = -1e300;
    for (size_t k = 0; k < 2; ++k) {
      const double lag = w[k] * static_cast<double>(std::max<int64_t>(i, 1)) - count[k];
      if (lag > most) {
        most = lag;
        d = k;
      }
    }
    EXPECT_TRUE(train.sample(i, &got).ok());
    EXPECT_TRUE(c->splits[d].sets[0]->sample(count[d], &want).ok());
    EXPECT_EQ(got.tokens, want.tokens) << i;
    EXPECT_EQ(got.labels, want.labels) << i;
    EXPECT_EQ(got.is_random, want.is_random) << i;
    expect_valid(got, vocab, 64, i);
    ++count[d];
  }
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_LE(std::abs(static_cast<double>(count[k]) - w[k] * kTrain), 1.0) << k;
    // Each source's train dataset was asked for ceil(n * w * 1.005) samples.
    BertDatasetOptions o = opt;
    o.num_samples = static_cast<int64_t>(std::ceil(kTrain * w[k] * 1.005));
    o.cache.use_cache = false;
    const auto docs = c->splits[k].documents[0];
    auto ref =
        BertDataset::create(bert_t5_data(), sources[k].prefix, docs.first, docs.second, vocab, o);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_EQ(c->splits[k].sets[0]->size(), (*ref)->size()) << k;
    EXPECT_TRUE(c->splits[k].sets[0]->sample(3, &got).ok());
    EXPECT_TRUE((*ref)->sample(3, &want).ok());
    EXPECT_EQ(got.tokens, want.tokens) << k;
  }
  EXPECT_EQ(c->sets[1]->size(), 10);  // the validation blend, n positions
}

TEST(BertCorpus, WholeDataAndErrors) {
  ScratchDir dir;
  BertDatasetOptions opt;
  opt.max_seq_length = 64;
  opt.cache.cache_dir = dir.path();
  const MlmVocab vocab = bert_t5_vocab(0);
  const std::vector<GptDataSource> one = {{1.0, copy_fixture(dir, "a")}};
  // valid_paths: every document is the "validation" split of "0,1,0".
  auto whole = open_bert_corpus(one, false, "0,1,0", {0, 10, 0}, vocab, opt);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->splits[0].documents[1],
            std::make_pair(int64_t{0}, bert_t5_data()->num_documents()));
  ASSERT_NE(whole->sets[1], nullptr);
  EXPECT_EQ(whole->sets[1]->blend_index(), nullptr);
  // Two prefixes need weights; weights must be >= 0 and not all 0.
  const std::vector<GptDataSource> two = {{1.0, one[0].prefix}, {1.0, copy_fixture(dir, "b")}};
  EXPECT_FALSE(open_bert_corpus(two, false, "1", {5, 0, 0}, vocab, opt).ok());
  EXPECT_FALSE(open_bert_corpus({{0.0, one[0].prefix}}, true, "1", {5, 0, 0}, vocab, opt).ok());
  // The test split of "8,2,0" has no documents anywhere: not built, no error...
  auto none = open_bert_corpus(two, true, "8,2,0", {5, 0, 5}, vocab, opt);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->sets[2], nullptr);
  // ... but a blend whose validation split has documents in one prefix only is refused, naming
  // the other (a one-document copy of the fixture's first document: all of it is train).
  const std::string tiny = dir.path() + "/tiny_text_sentence";
  auto w = IndexedDatasetWriter::create(tiny, bert_t5_data()->dtype());
  ASSERT_TRUE(w.ok()) << w.status();
  const auto data = bert_t5_data();
  for (int64_t q = data->doc_idx()[0]; q < data->doc_idx()[1]; ++q) {
    std::vector<int32_t> tokens(static_cast<size_t>(data->sizes()[q]));
    EXPECT_TRUE(data->read(q, 0, data->sizes()[q], tokens.data()).ok());
    ASSERT_TRUE((*w)->add_sequence(tokens).ok());
  }
  ASSERT_TRUE((*w)->finish().ok());
  const std::vector<GptDataSource> uneven = {{1.0, one[0].prefix}, {1.0, tiny}};
  auto bad = open_bert_corpus(uneven, true, "8,2,0", {5, 5, 0}, vocab, opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("valid split of " + tiny), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace anvil::io
