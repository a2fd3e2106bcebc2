// split_documents (Megatron's get_train_valid_test_split_, expected values computed with the
// Python original) and GptSampleStream: sample length, one-token overlap, coverage of an
// epoch, document order inside samples, determinism, seeds and epochs, thread safety.
#include "io/gpt_samples.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

Ranges ranges(int64_t a, int64_t b, int64_t c, int64_t d) { return {{a, b}, {b, c}, {c, d}}; }

TEST(SplitDocuments, MatchesMegatron) {
  // [split, N, Megatron's splits_index] from megatron/data/dataset_utils.py.
  struct Case {
    const char* split;
    int64_t n;
    Ranges want;
  };
  const Case cases[] = {
      {"969,30,1", 1000, ranges(0, 969, 999, 1000)},
      {"969, 30, 1", 10, ranges(0, 10, 10, 10)},
      {"969,30,1", 12345, ranges(0, 11963, 12333, 12345)},
      {"949,50,1", 100, ranges(0, 95, 100, 100)},
      {"1/1/1", 10, ranges(0, 4, 7, 10)},
      {"1,1", 3, ranges(0, 1, 3, 3)},
      {"1,1", 1, ranges(0, 1, 1, 1)},
      {"100", 7, ranges(0, 7, 7, 7)},
      {"98,2", 5, ranges(0, 5, 5, 5)},
      {"1,2,1", 2, ranges(0, 1, 2, 2)},
      {"969,30,1", 0, ranges(0, 0, 0, 0)},
      {"8,1,1", 25, ranges(0, 21, 23, 25)},  // 2.5 rounds to 2 (ties to even, as Python)
  };
  for (const Case& c : cases) {
    auto got = split_documents(c.split, c.n);
    ASSERT_TRUE(got.ok()) << c.split << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.split << " N=" << c.n;
  }
}

TEST(SplitDocuments, ClampsWhereMegatronGoesNegative) {
  // Megatron yields [0, -1, 1, 3] here; we keep the boundaries inside [0, N].
  auto got = split_documents("0,1,1", 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, ranges(0, 0, 1, 3));
}

TEST(SplitDocuments, RejectsBadStrings) {
  for (const char* bad : {"", "a,b", "1,2,3,4", "0,0,0", "-1,2", "1,,2", "nan"}) {
    EXPECT_EQ(split_documents(bad, 10).status().code(), absl::StatusCode::kInvalidArgument)
        << '"' << bad << '"';
  }
  EXPECT_FALSE(split_documents("1", -1).ok());
}

// A dataset whose token values are their global positions, so every token is unique and its
// document is known. Some documents are sentence-split, some are shorter than seq_len.
class GptSamples : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::vector<int>> shape = {
        {17}, {3, 5, 2}, {1}, {40}, {9}, {6, 6}, {23}, {2}, {31}, {4, 1, 7}, {12}, {50},
    };
    auto w = IndexedDatasetWriter::create(dir_.file("pos"), TokenDType::kI32);
    ASSERT_TRUE(w.ok()) << w.status();
    int32_t next = 0;
    for (const auto& doc : shape) {
      doc_first_.push_back(next);
      for (const int len : doc) {
        std::vector<int32_t> seq(len);
        for (int32_t& t : seq) {
          doc_of_[next] = static_cast<int>(doc_first_.size()) - 1;
          t = next++;
        }
        ASSERT_TRUE((*w)->add_sequence(seq).ok());
      }
      doc_last_.push_back(next - 1);
      ASSERT_TRUE((*w)->end_document().ok());
    }
    ASSERT_TRUE((*w)->finish().ok());
    auto ds = IndexedDataset::open(dir_.file("pos"));
    ASSERT_TRUE(ds.ok()) << ds.status();
    data_ = std::move(*ds);
  }

  int64_t tokens_in(int64_t begin, int64_t end) const {
    return (end == static_cast<int64_t>(doc_first_.size()) ? data_->total_tokens()
                                                           : doc_first_[end]) -
           doc_first_[begin];
  }

  std::vector<int32_t> sample(const GptSampleStream& s, int64_t i) const {
    std::vector<int32_t> out(s.seq_len() + 2, -7);  // one guard element past the end
    s.sample(i, out.data());
    EXPECT_EQ(out.back(), -7) << "sample " << i << " wrote past seq_len + 1 tokens";
    out.pop_back();
    return out;
  }

  testing::ScratchDir dir_;
  std::unique_ptr<IndexedDataset> data_;
  std::vector<int32_t> doc_first_, doc_last_;
  std::map<int32_t, int> doc_of_;
};

TEST_F(GptSamples, EpochStructure) {
  for (const int64_t seq_len : {1, 4, 7, 16, 64}) {
    for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 12}, {3, 9}}) {
      SCOPED_TRACE(::testing::Message()
                   << "seq_len " << seq_len << " docs [" << begin << ", " << end << ")");
      auto s = GptSampleStream::create(data_.get(), begin, end, seq_len, 1234);
      ASSERT_TRUE(s.ok()) << s.status();
      const int64_t total = tokens_in(begin, end);
      ASSERT_EQ(s->samples_per_epoch(), (total - 1) / seq_len);
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        std::set<int32_t> covered;
        std::map<int32_t, int> starts, ends;  // first / last token -> how many samples
        for (int64_t j = 0; j < s->samples_per_epoch(); ++j) {
          const std::vector<int32_t> t = sample(*s, epoch * s->samples_per_epoch() + j);
          for (size_t k = 0; k < t.size(); ++k) {
            // Every token belongs to the range ...
            ASSERT_GE(t[k], doc_first_[begin]);
            ASSERT_LT(t[k], doc_first_[begin] + total);
            covered.insert(t[k]);
            // ... and inside a sample tokens follow document order: the next token of the
            // same document, or a document end followed by another document's start.
            if (k > 0 && t[k] != t[k - 1] + 1) {
              ASSERT_EQ(t[k - 1], doc_last_[doc_of_[t[k - 1]]]);
              ASSERT_EQ(t[k], doc_first_[doc_of_[t[k]]]);
            }
          }
          ++starts[t.front()];
          ++ends[t.back()];
        }
        // The epoch covers all but the tail of fewer than seq_len tokens.
        EXPECT_EQ(static_cast<int64_t>(covered.size()), s->samples_per_epoch() * seq_len + 1);
        EXPECT_LT(total - static_cast<int64_t>(covered.size()), seq_len);
        // Consecutive samples overlap by one token: every sample but the last ends where
        // exactly one other sample starts, and every sample but the first starts where one ends.
        int unmatched_ends = 0, unmatched_starts = 0;
        for (const auto& [tok, n] : ends) {
          EXPECT_EQ(n, 1);
          if (!starts.count(tok)) ++unmatched_ends;
        }
        for (const auto& [tok, n] : starts) {
          EXPECT_EQ(n, 1);
          if (!ends.count(tok)) ++unmatched_starts;
        }
        EXPECT_EQ(unmatched_ends, 1);
        EXPECT_EQ(unmatched_starts, 1);
      }
    }
  }
}

TEST_F(GptSamples, DeterministicPerSeedAndReshuffledPerEpoch) {
  constexpr int64_t kSeqLen = 8;
  auto a = GptSampleStream::create(data_.get(), 0, 12, kSeqLen, 42);
  auto b = GptSampleStream::create(data_.get(), 0, 12, kSeqLen, 42);
  auto c = GptSampleStream::create(data_.get(), 0, 12, kSeqLen, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const int64_t spe = a->samples_per_epoch();
  std::vector<std::vector<int32_t>> epoch0, epoch1, other_seed;
  // b is read backwards and across epochs first, so its lazy epoch cache is exercised.
  for (int64_t i = 3 * spe - 1; i >= 0; --i) EXPECT_EQ(sample(*b, i), sample(*a, i)) << i;
  for (int64_t j = 0; j < spe; ++j) {
    epoch0.push_back(sample(*a, j));
    epoch1.push_back(sample(*a, spe + j));
    other_seed.push_back(sample(*c, j));
  }
  EXPECT_NE(epoch0, other_seed);
  EXPECT_NE(epoch0, epoch1);
}

TEST_F(GptSamples, ThreadsAgreeWithSerialReads) {
  auto s = GptSampleStream::create(data_.get(), 0, 12, 5, 7);
  ASSERT_TRUE(s.ok());
  const int64_t n = 6 * s->samples_per_epoch();
  std::vector<std::vector<int32_t>> want(n);
  {
    auto serial = GptSampleStream::create(data_.get(), 0, 12, 5, 7);
    ASSERT_TRUE(serial.ok());
    for (int64_t i = 0; i < n; ++i) want[i] = sample(*serial, i);
  }
  std::vector<std::vector<int32_t>> got(n, std::vector<int32_t>(s->seq_len() + 1));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Interleaved indices, so threads keep crossing epochs against each other.
      for (int64_t i = t; i < n; i += 4) s->sample(i, got[i].data());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(got, want);
}

TEST_F(GptSamples, CopiesShareTheLayout) {
  auto s = GptSampleStream::create(data_.get(), 0, 12, 8, 3);
  ASSERT_TRUE(s.ok());
  const GptSampleStream copy = *s;
  for (int64_t i = 0; i < 3 * s->samples_per_epoch(); ++i) {
    EXPECT_EQ(sample(copy, i), sample(*s, i));
  }
}

TEST_F(GptSamples, Errors) {
  const int64_t total = data_->total_tokens();
  EXPECT_TRUE(GptSampleStream::create(data_.get(), 0, 12, total - 1, 1).ok());
  EXPECT_EQ(GptSampleStream::create(data_.get(), 0, 12, total, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GptSampleStream::create(data_.get(), 2, 3, 1, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);  // a 1-token document
  EXPECT_EQ(GptSampleStream::create(data_.get(), 5, 5, 1, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);  // empty range
  EXPECT_EQ(GptSampleStream::create(data_.get(), 0, 13, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GptSampleStream::create(data_.get(), 4, 3, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GptSampleStream::create(data_.get(), 0, 12, 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GptSampleStream::create(nullptr, 0, 0, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GptSamples, SplitRangesFeedStreams) {
  auto splits = split_documents("8,2,2", data_->num_documents());
  ASSERT_TRUE(splits.ok());
  for (const auto& [begin, end] : *splits) {
    auto s = GptSampleStream::create(data_.get(), begin, end, 4, 1);
    ASSERT_TRUE(s.ok()) << begin << ".." << end << ": " << s.status();
    for (int64_t i = 0; i < s->samples_per_epoch(); ++i) {
      for (const int32_t t : sample(*s, i)) {
        EXPECT_GE(doc_of_[t], begin);
        EXPECT_LT(doc_of_[t], end);
      }
    }
  }
}

}  // namespace
}  // namespace anvil::io
