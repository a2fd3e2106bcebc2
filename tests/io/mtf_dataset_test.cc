// io/mtf_dataset: the fixture's pairs (tests/io/mtf_fixture.h) written as a
// PREFIX_inputs_document / PREFIX_targets_document pair, opened and packed: the index (shuffles,
// rows) and the packed rows equal the fork's DecoderPackedMTFDataset, so the sample order for a
// seed is the fork's; a split starting at document a reads documents a + k; pairs of unequal
// counts, a missing file and a sample past the end are errors naming them.
#include "io/mtf_dataset.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/io/io_test_util.h"
#include "tests/io/mtf_fixture.h"

namespace anvil::io {
namespace {

using testing::ScratchDir;
using testing_mtf::FixtureCase;
using testing_mtf::read_fixture;

// PREFIX_{inputs,targets}_document with pairs d = first .. of the given sizes, tokens
// 1000 d + t (inputs) and 1000 d + 500 + t (targets), as the fixture numbers them.
void write_pairs(const std::string& prefix, const std::vector<int64_t>& inputs,
                 const std::vector<int64_t>& targets) {
  for (const bool in : {true, false}) {
    auto w = IndexedDatasetWriter::create(prefix + (in ? "_inputs_document" : "_targets_document"),
                                          TokenDType::kI32);
    ASSERT_TRUE(w.ok()) << w.status();
    const std::vector<int64_t>& sizes = in ? inputs : targets;
    for (size_t d = 0; d < sizes.size(); ++d) {
      std::vector<int32_t> seq;
      for (int64_t t = 0; t < sizes[d]; ++t) {
        seq.push_back(static_cast<int32_t>(1000 * d + (in ? 0 : 500) + t));
      }
      ASSERT_TRUE((*w)->add_sequence(seq).ok());
      ASSERT_TRUE((*w)->end_document().ok());
    }
    ASSERT_TRUE((*w)->finish().ok());
  }
}

TEST(MtfDataset, SamplesAreTheForks) {
  ScratchDir dir;
  for (const FixtureCase& c : read_fixture()) {
    SCOPED_TRACE(c.name);
    const std::string prefix = dir.file(c.name);
    write_pairs(prefix, c.inputs, c.targets);
    auto pairs = open_mtf_pairs(prefix);
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    const int64_t n = static_cast<int64_t>(c.inputs.size());
    auto s = MtfSamples::build(*pairs, 0, n, c.params.at("num_samples"), c.params.at("seq_length"),
                               static_cast<uint32_t>(c.params.at("seed")),
                               static_cast<int32_t>(c.params.at("pad")));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->index().shuffle, c.shuffle);
    std::vector<int64_t> flat;
    for (const auto& r : (*s)->index().samples) flat.insert(flat.end(), r.begin(), r.end());
    EXPECT_EQ(flat, c.samples);
    for (const testing_mtf::Row& r : c.rows) {
      SCOPED_TRACE(r.k);
      MtfRow row;
      ASSERT_TRUE((*s)->sample(r.k, &row).ok());
      EXPECT_EQ(row.tokens, r.tokens);
      EXPECT_EQ(row.segment_ids, r.segment_ids);
      EXPECT_EQ(std::vector<int32_t>(row.is_inputs.begin(), row.is_inputs.end()), r.is_inputs);
    }
    MtfRow row;
    const absl::Status past = (*s)->sample((*s)->size(), &row);
    EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  }
}

// A split of documents [2, 7): id k reads document 2 + k (the fork would read document k).
TEST(MtfDataset, SplitReadsItsOwnDocuments) {
  ScratchDir dir;
  const std::string prefix = dir.file("split");
  write_pairs(prefix, {1, 2, 3, 1, 2, 3, 1}, {1, 1, 2, 2, 1, 1, 2});
  auto pairs = open_mtf_pairs(prefix);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  auto s = MtfSamples::build(*pairs, 2, 5, 4, 8, 9, 0);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int64_t i = 0; i < (*s)->size(); ++i) {
    MtfRow row;
    ASSERT_TRUE((*s)->sample(i, &row).ok());
    const auto [start, end] = (*s)->index().samples[static_cast<size_t>(i)];
    EXPECT_EQ(row.tokens[0], 1000 * (2 + (*s)->index().shuffle[static_cast<size_t>(start)]));
    EXPECT_GE(row.tokens[0], 2000);
  }
  EXPECT_FALSE(MtfSamples::build(*pairs, 3, 5, 4, 8, 9, 0).ok());
}

TEST(MtfDataset, RefusesUnpairedOrMissingFiles) {
  ScratchDir dir;
  const std::string prefix = dir.file("bad");
  write_pairs(prefix, {1, 2, 3}, {1, 1, 2});
  auto w = IndexedDatasetWriter::create(prefix + "_targets_document", TokenDType::kI32);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->add_sequence(std::vector<int32_t>{5}).ok());
  ASSERT_TRUE((*w)->finish().ok());
  auto p = open_mtf_pairs(prefix);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("holds 3 sequences and"), std::string::npos) << p.status();
  EXPECT_NE(p.status().message().find("_targets_document 1"), std::string::npos) << p.status();
  auto missing = open_mtf_pairs(dir.file("none"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none_inputs_document"), std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace anvil::io
