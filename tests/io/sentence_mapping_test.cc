// The BERT/T5 sample mapping (io/sentence_mapping) against the transcription of Megatron's
// helpers.cpp build_mapping in scripts/make_bert_t5_fixture.py, row for row; its cache (bytes
// equal to np.save's, reused by a second open, a new file for any changed parameter, a corrupt
// file rebuilt); and the errors.
#include "io/sentence_mapping.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/io/bert_t5_fixture.h"

namespace anvil::io {
namespace {

using testing::bert_t5_array;
using testing::bert_t5_cases;
using testing::bert_t5_data;
using testing::bert_t5_expected;
using testing::bert_t5_prefix;
using testing::read_file;
using testing::ScratchDir;
using testing::write_file;

struct Case {
  std::string name;
  int64_t begin, end;
  SentenceMappingOptions opt;
  int64_t rows;
};

// "mapping case begin end num_samples max_length short_seq_prob seed min_num_sent rows"
std::vector<Case> mapping_cases() {
  std::vector<Case> out;
  for (const auto& c : bert_t5_cases("mapping")) {
    Case k;
    k.name = c[1];
    k.begin = std::stoll(c[2]);
    k.end = std::stoll(c[3]);
    k.opt.num_samples = std::stoll(c[4]);
    k.opt.max_length = std::stoi(c[5]);
    k.opt.short_seq_prob = std::stod(c[6]);
    k.opt.seed = std::stoi(c[7]);
    k.opt.min_num_sent = std::stoi(c[8]);
    k.rows = std::stoll(c[9]);
    out.push_back(k);
  }
  return out;
}

TEST(SentenceMapping, MatchesMegatronBuildMapping) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  for (const Case& c : mapping_cases()) {
    SCOPED_TRACE(c.name);
    auto got = build_sentence_mapping(*data, c.begin, c.end, c.opt);
    ASSERT_TRUE(got.ok()) << got.status();
    const NpyArray want = bert_t5_array(c.name + "_mapping");
    ASSERT_EQ(got->shape(), want.shape());
    ASSERT_EQ(got->shape()[0], c.rows);
    EXPECT_EQ(got->dtype(), NpyDType::kU32);
    for (int64_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ((*got)[i], want[i]) << "element " << i << " (row " << i / 3 << ")";
    }
    EXPECT_TRUE(validate_sentence_mapping(*got, *data, c.begin, c.end, c.opt).ok());
  }
}

TEST(SentenceMapping, CacheIsMegatronsBytesAndIsReused) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  const Case c = mapping_cases()[0];
  ScratchDir dir;
  MappingCacheOptions cache;
  cache.cache_dir = dir.path();
  auto first = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->loaded_from_cache());
  EXPECT_EQ(first->path(),
            dir.path() + "/synth_train_indexmap_150mns_61msl_0.1ssp_1234s_2mins_0-40docs.npy");
  // The file is what Megatron's np.save writes for the same mapping.
  EXPECT_EQ(read_file(first->path()), read_file(bert_t5_expected(c.name + "_mapping")));

  auto second = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->loaded_from_cache());
  ASSERT_EQ(second->size(), first->size());
  for (int64_t i = 0; i < first->size(); ++i) {
    ASSERT_EQ(second->start(i), first->start(i));
    ASSERT_EQ(second->end(i), first->end(i));
    ASSERT_EQ(second->target(i), first->target(i));
  }
}

TEST(SentenceMapping, EveryParameterChangesTheCacheFile) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  const Case c = mapping_cases()[0];
  ScratchDir dir;
  MappingCacheOptions cache;
  cache.cache_dir = dir.path();
  ASSERT_TRUE(SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache).ok());
  auto rebuilt = [&](SentenceMappingOptions o, int64_t begin, int64_t end,
                     const std::string& name) {
    MappingCacheOptions k = cache;
    k.name = name;
    auto m = SentenceMapping::create(*data, bert_t5_prefix(), begin, end, o, k);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() && !m->loaded_from_cache();
  };
  SentenceMappingOptions o = c.opt;
  o.num_samples += 1;
  EXPECT_TRUE(rebuilt(o, c.begin, c.end, "train"));
  o = c.opt;
  o.max_length -= 1;
  EXPECT_TRUE(rebuilt(o, c.begin, c.end, "train"));
  o = c.opt;
  o.short_seq_prob = 0.101;  // Megatron's {:.2f} would reuse the 0.10 file
  EXPECT_TRUE(rebuilt(o, c.begin, c.end, "train"));
  o = c.opt;
  o.seed += 1;
  EXPECT_TRUE(rebuilt(o, c.begin, c.end, "train"));
  o = c.opt;
  o.min_num_sent = 1;  // no binary head: Megatron's name is the same
  EXPECT_TRUE(rebuilt(o, c.begin, c.end, "train"));
  EXPECT_TRUE(rebuilt(c.opt, c.begin, c.end - 1, "train"));  // another split
  EXPECT_TRUE(rebuilt(c.opt, c.begin, c.end, "valid"));
  // And the original is still a cache hit.
  auto again = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->loaded_from_cache());
}

TEST(SentenceMapping, CorruptCacheIsRebuilt) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  const Case c = mapping_cases()[0];
  ScratchDir dir;
  MappingCacheOptions cache;
  cache.cache_dir = dir.path();
  auto first = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(first.ok());
  const std::string good = read_file(first->path());
  // Truncated file.
  write_file(first->path(), good.substr(0, good.size() - 4));
  auto m = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->loaded_from_cache());
  EXPECT_EQ(read_file(first->path()), good);
  // A row crossing a document boundary (end sentence moved past its document).
  std::string bad = good;
  const size_t data_start = bad.size() - 4 * 3 * static_cast<size_t>(first->size());
  const uint32_t huge = 100000;
  bad.replace(data_start + 4, 4, reinterpret_cast<const char*>(&huge), 4);
  write_file(first->path(), bad);
  m = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->loaded_from_cache());
  EXPECT_EQ(read_file(first->path()), good);
}

TEST(SentenceMapping, NoFilesWithoutCache) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  const Case c = mapping_cases()[0];
  ScratchDir dir;
  MappingCacheOptions cache;
  cache.cache_dir = dir.path() + "/sub";
  cache.use_cache = false;
  auto m = SentenceMapping::create(*data, bert_t5_prefix(), c.begin, c.end, c.opt, cache);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), c.rows);
  EXPECT_TRUE(m->path().empty());
  EXPECT_FALSE(testing::file_exists(cache.cache_dir));
}

TEST(SentenceMapping, BadInputsAreErrors) {
  auto data = bert_t5_data();
  ASSERT_NE(data, nullptr);
  const Case c = mapping_cases()[0];
  auto fails = [&](SentenceMappingOptions o, int64_t b, int64_t e, const std::string& says) {
    const absl::Status s = build_sentence_mapping(*data, b, e, o).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s)) << s;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
  };
  SentenceMappingOptions o = c.opt;
  fails(o, 5, 5, "document range");
  fails(o, 0, data->num_documents() + 1, "document range");
  o.num_samples = 0;
  fails(o, 0, 10, "num_samples");
  o = c.opt;
  o.max_length = 1;
  fails(o, 0, 10, "target length");
  o = c.opt;
  o.short_seq_prob = 1.5;
  fails(o, 0, 10, "short_seq_prob");
  o = c.opt;
  o.seed = 0;
  fails(o, 0, 10, "seed");
  o = c.opt;
  o.min_num_sent = 3;
  fails(o, 0, 10, "min_num_sent");
}

TEST(SentenceMapping, UnsplitDocumentsAreAnError) {
  // One sentence per document: nothing for the binary head (Megatron would loop forever).
  ScratchDir dir;
  auto w = IndexedDatasetWriter::create(dir.file("one"), TokenDType::kU16);
  ASSERT_TRUE(w.ok());
  for (int d = 0; d < 4; ++d) {
    ASSERT_TRUE((*w)->add_sequence(std::vector<int32_t>{5, 6, 7}).ok());
    ASSERT_TRUE((*w)->end_document().ok());
  }
  ASSERT_TRUE((*w)->finish().ok());
  auto data = IndexedDataset::open(dir.file("one"));
  ASSERT_TRUE(data.ok());
  SentenceMappingOptions o;
  o.num_samples = 3;
  o.max_length = 10;
  const absl::Status s = build_sentence_mapping(**data, 0, 4, o).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("--split-sentences"), std::string::npos) << s;
  o.min_num_sent = 1;  // without the binary head, one sentence is a sample
  auto m = build_sentence_mapping(**data, 0, 4, o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shape()[0], 4);
}

}  // namespace
}  // namespace anvil::io
