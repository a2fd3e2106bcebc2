// BERT's train/valid/test datasets of one prefix (io/bert_corpus): the document ranges are
// split_documents' of the split string, a split asked for no samples (or without documents)
// is not built, and each built split is exactly BertDataset::create over its range (same size,
// same samples) with its own cache name; a missing prefix is an error naming it.
#include "io/bert_corpus.h"

#include <string>

#include "gtest/gtest.h"
#include "io/data_split.h"
#include "tests/io/bert_t5_fixture.h"

namespace anvil::io {
namespace {

using testing::bert_t5_data;
using testing::bert_t5_prefix;
using testing::bert_t5_vocab;
using testing::ScratchDir;

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
      splits->sets[k]->sample(i, &a);
      (*ref)->sample(i, &b);
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

}  // namespace
}  // namespace anvil::io
