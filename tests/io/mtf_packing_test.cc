// io/mtf_packing against tests/io/fixtures/mtf_packing.txt, written by scripts/make_mtf_fixture.py
// (Megatron-DeepSpeed's DecoderPackedMTFDataset index and pack_samples under numpy): the
// concatenated shuffles, the [start, end) rows (pairs longer than a row skipped, the open row
// carried across epochs) and the first, second and last packed rows, exactly; the errors for
// data where no pair fits and for a row that overflows.
#include "io/mtf_packing.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/io/mtf_fixture.h"

namespace anvil::io {
namespace {

using testing_mtf::FixtureCase;
using testing_mtf::read_fixture;
using testing_mtf::Row;

TEST(MtfPacking, IndexAndRowsMatchTheFork) {
  const std::vector<FixtureCase> cases = read_fixture();
  ASSERT_EQ(cases.size(), 3u);
  bool skipped_a_pair = false;
  for (const FixtureCase& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t L = c.params.at("seq_length");
    auto idx = build_mtf_packed_index(c.inputs, c.targets, c.params.at("num_samples"), L,
                                      static_cast<uint32_t>(c.params.at("seed")));
    ASSERT_TRUE(idx.ok()) << idx.status();
    EXPECT_EQ(idx->shuffle, c.shuffle);
    std::vector<int64_t> flat;
    for (const auto& s : idx->samples) flat.insert(flat.end(), s.begin(), s.end());
    EXPECT_EQ(flat, c.samples);
    EXPECT_GT(static_cast<int64_t>(idx->samples.size()), c.params.at("num_samples"));
    for (size_t i = 0; i < c.inputs.size(); ++i) skipped_a_pair |= c.inputs[i] + c.targets[i] > L;
    ASSERT_EQ(c.rows.size(), 3u);
    for (const Row& r : c.rows) {
      SCOPED_TRACE(r.k);
      const auto& s = idx->samples.at(static_cast<size_t>(r.k));
      std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
      for (int64_t g = s[0]; g < s[1]; ++g) {
        const int64_t d = idx->shuffle[static_cast<size_t>(g)];
        std::vector<int32_t> in, tg;  // the fixture's token ids of pair d
        for (int64_t t = 0; t < c.inputs[d]; ++t) in.push_back(static_cast<int32_t>(1000 * d + t));
        for (int64_t t = 0; t < c.targets[d]; ++t) {
          tg.push_back(static_cast<int32_t>(1000 * d + 500 + t));
        }
        pairs.emplace_back(in, tg);
      }
      auto row = pack_mtf_row(pairs, L, static_cast<int32_t>(c.params.at("pad")));
      ASSERT_TRUE(row.ok()) << row.status();
      EXPECT_EQ(row->tokens, r.tokens);
      EXPECT_EQ(row->segment_ids, r.segment_ids);
      EXPECT_EQ(std::vector<int32_t>(row->is_inputs.begin(), row->is_inputs.end()), r.is_inputs);
    }
  }
  EXPECT_TRUE(skipped_a_pair) << "the fixture must cover pairs longer than a row";
}

TEST(MtfPacking, RefusesDataWhereNothingFitsAndOverfullRows) {
  auto idx = build_mtf_packed_index({5, 6}, {5, 5}, 3, 9, 1);
  ASSERT_FALSE(idx.ok());
  EXPECT_NE(idx.status().message().find("no input/target pair fits seq_length 9"),
            std::string::npos)
      << idx.status();
  EXPECT_FALSE(build_mtf_packed_index({1, 2}, {1}, 3, 9, 1).ok());
  auto row = pack_mtf_row({{{1, 2}, {3}}, {{4, 5}, {6, 7}}}, 6, 0);
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.status().message().find("pair 2"), std::string::npos) << row.status();
}

}  // namespace
}  // namespace anvil::io
