// GptDataset (Megatron's GPT index): identical arrays, cache files and samples to a numpy
// re-implementation of Megatron's code (scripts/make_gpt_index_fixture.py) in every epoch
// regime; Megatron's cache files load as is and numpy reads anvil's; every sample has
// seq_len + 1 tokens and an epoch covers every token; caches reload identically and a
// corrupt, partial or stale cache is rebuilt, a killed build's temporaries removed; concurrent
// builders; 64-bit epoch arithmetic.
#include "io/gpt_dataset.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/io/gpt_index_fixture.h"

namespace anvil::io {
namespace {

using testing::file_exists;
using testing::gpt_cases;
using testing::gpt_expected;
using testing::gpt_fixture_dir;
using testing::load_expected;
using testing::read_file;
using testing::same_values;
using testing::ScratchDir;
using testing::write_file;

const char* const kSuffixes[3] = {"_doc_idx.npy", "_sample_idx.npy", "_shuffle_idx.npy"};

// Copies fixture dataset NAME.{bin,idx} into `dir`; returns the new prefix.
std::string copy_dataset(const ScratchDir& dir, const std::string& name) {
  for (const char* ext : {".bin", ".idx"}) {
    write_file(dir.file(name + ext), read_file(gpt_fixture_dir() + "/" + name + ext));
  }
  return dir.file(name);
}

struct GptCase {
  std::string id, dataset, name;
  int64_t begin, end, num_samples, seq_len;
  uint32_t seed;
  int64_t epochs;
  bool separate;
  GptDatasetOptions options() const {
    GptDatasetOptions o;
    o.name = name;
    o.num_samples = num_samples;
    o.seq_len = seq_len;
    o.seed = seed;
    o.log.rank = -1;  // keep test output readable: build lines still print on stderr
    return o;
  }
  // The Megatron cache file name (without directory) of one array.
  std::string file(const char* suffix) const {
    return dataset + "_" + name + "_indexmap_" + std::to_string(num_samples) + "ns_" +
           std::to_string(seq_len) + "sl_" + std::to_string(seed) + "s" + suffix;
  }
};

std::vector<GptCase> all_cases() {
  std::vector<GptCase> out;
  for (const auto& c : gpt_cases("gpt")) {
    out.push_back(GptCase{c[1], c[2], c[3], std::stoll(c[4]), std::stoll(c[5]), std::stoll(c[6]),
                          std::stoll(c[7]), static_cast<uint32_t>(std::stoull(c[8])),
                          std::stoll(c[9]), c[10] == "1"});
  }
  return out;
}

std::unique_ptr<GptDataset> open_case(const std::string& prefix, const GptCase& c,
                                      GptDatasetOptions o) {
  auto data = IndexedDataset::open(prefix);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return nullptr;
  auto ds = GptDataset::create(std::shared_ptr<const IndexedDataset>(std::move(*data)), prefix,
                               c.begin, c.end, o);
  EXPECT_TRUE(ds.ok()) << ds.status();
  return ds.ok() ? std::move(*ds) : nullptr;
}

// All samples of `ds` equal the fixture's <case>_samples.npy (Megatron's __getitem__).
void expect_samples(const GptDataset& ds, const std::string& case_id) {
  const NpyArray want = load_expected(case_id + "_samples.npy");
  const int64_t S1 = ds.seq_len() + 1;
  ASSERT_EQ(want.size(), ds.size() * S1) << case_id;
  std::vector<int32_t> got(S1);
  for (int64_t i = 0; i < ds.size(); ++i) {
    EXPECT_TRUE(ds.sample(i, got.data()).ok());
    for (int64_t t = 0; t < S1; ++t) {
      ASSERT_EQ(got[t], want[i * S1 + t]) << case_id << " sample " << i << " token " << t;
    }
  }
}

void expect_index_equal(const GptIndex& a, const GptIndex& b) {
  EXPECT_TRUE(same_values(a.doc_idx, b.doc_idx));
  EXPECT_TRUE(same_values(a.sample_idx, b.sample_idx));
  EXPECT_TRUE(same_values(a.shuffle_idx, b.shuffle_idx));
}

TEST(GptDataset, BuildsMegatronsIndexAndCacheFiles) {
  for (const GptCase& c : all_cases()) {
    SCOPED_TRACE(c.id);
    ScratchDir dir;
    const std::string prefix = copy_dataset(dir, c.dataset);
    auto ds = open_case(prefix, c, c.options());
    ASSERT_NE(ds, nullptr);
    EXPECT_FALSE(ds->loaded_from_cache());
    const GptIndex& ix = ds->index();
    EXPECT_EQ(ix.num_epochs, c.epochs);
    EXPECT_EQ(ix.separate_last_epoch, c.separate);
    EXPECT_GE(ds->size(), c.num_samples);
    // Megatron's dtypes: int32, int32, uint32.
    EXPECT_EQ(ix.doc_idx.dtype(), NpyDType::kI32);
    EXPECT_EQ(ix.sample_idx.dtype(), NpyDType::kI32);
    EXPECT_EQ(ix.shuffle_idx.dtype(), NpyDType::kU32);
    EXPECT_TRUE(same_values(ix.doc_idx, load_expected(c.file(kSuffixes[0]))));
    EXPECT_TRUE(same_values(ix.sample_idx, load_expected(c.file(kSuffixes[1]))));
    EXPECT_TRUE(same_values(ix.shuffle_idx, load_expected(c.file(kSuffixes[2]))));
    // The files anvil wrote are byte-identical to numpy's np.save of the same arrays.
    for (const char* suffix : kSuffixes) {
      EXPECT_EQ(read_file(dir.file(c.file(suffix))), read_file(gpt_expected(c.file(suffix))))
          << c.file(suffix);
    }
    expect_samples(*ds, c.id);
  }
}

TEST(GptDataset, CacheReloadsIdentically) {
  const GptCase c = all_cases()[1];
  ScratchDir dir;
  const std::string prefix = copy_dataset(dir, c.dataset);
  auto built = open_case(prefix, c, c.options());
  ASSERT_NE(built, nullptr);
  auto loaded = open_case(prefix, c, c.options());
  ASSERT_NE(loaded, nullptr);
  EXPECT_FALSE(built->loaded_from_cache());
  EXPECT_TRUE(loaded->loaded_from_cache());
  expect_index_equal(built->index(), loaded->index());
  EXPECT_EQ(loaded->index().num_epochs, c.epochs);
  EXPECT_EQ(loaded->index().separate_last_epoch, c.separate);
  expect_samples(*loaded, c.id);
}

TEST(GptDataset, LoadsCachesWrittenByMegatron) {
  for (const GptCase& c : all_cases()) {
    SCOPED_TRACE(c.id);
    ScratchDir dir;
    const std::string prefix = copy_dataset(dir, c.dataset);
    for (const char* suffix : kSuffixes) {
      write_file(dir.file(c.file(suffix)), read_file(gpt_expected(c.file(suffix))));
    }
    auto ds = open_case(prefix, c, c.options());
    ASSERT_NE(ds, nullptr);
    EXPECT_TRUE(ds->loaded_from_cache());
    expect_samples(*ds, c.id);
  }
}

TEST(GptDataset, NumpyReadsAnvilsCacheFiles) {
  if (!file_exists("/usr/bin/python3") ||
      std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
    GTEST_SKIP() << "no /usr/bin/python3 with numpy";
  }
  ScratchDir dir;
  for (const GptCase& c : all_cases()) {
    const std::string prefix = copy_dataset(dir, c.dataset);
    ASSERT_NE(open_case(prefix, c, c.options()), nullptr);
  }
  const std::string script = gpt_fixture_dir() + "/../../../../scripts/make_gpt_index_fixture.py";
  const std::string cmd = "/usr/bin/python3 " + script + " --verify " + dir.path();
  const int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
}

// A dataset whose every token is unique (its global position), written with anvil's writer.
std::string write_positions_dataset(const ScratchDir& dir, const std::vector<int32_t>& lengths) {
  const std::string prefix = dir.file("pos");
  auto w = IndexedDatasetWriter::create(prefix, TokenDType::kI32);
  EXPECT_TRUE(w.ok());
  int32_t next = 0;
  for (int32_t n : lengths) {
    std::vector<int32_t> seq(n);
    std::iota(seq.begin(), seq.end(), next);
    next += n;
    EXPECT_TRUE((*w)->add_sequence(seq).ok());
    EXPECT_TRUE((*w)->end_document().ok());
  }
  EXPECT_TRUE((*w)->finish().ok());
  return prefix;
}

TEST(GptDataset, SamplesHaveSeqLenPlusOneTokensAndAnEpochCoversEveryToken) {
  ScratchDir dir;
  std::vector<int32_t> lengths;
  for (int i = 0; i < 57; ++i) lengths.push_back(1 + (i * 37) % 90);
  const std::string prefix = write_positions_dataset(dir, lengths);
  auto data = IndexedDataset::open(prefix);
  ASSERT_TRUE(data.ok());
  std::shared_ptr<const IndexedDataset> shared(std::move(*data));
  const int64_t begin = 5, end = 50;
  int64_t tokens = 0;
  for (int64_t s = begin; s < end; ++s) tokens += lengths[s];
  for (int64_t S : {1, 7, 64, 500, 1035, 2069}) {
    SCOPED_TRACE(S);
    GptDatasetOptions o;
    o.num_samples = S == 1 ? 3000 : 10;  // one epoch up to S = 64, several above
    o.seq_len = S;
    o.use_cache = false;
    auto ds = GptDataset::create(shared, prefix, begin, end, o);
    ASSERT_TRUE(ds.ok()) << ds.status();
    // With one epoch, samples in sample_idx order walk the shuffled sequences once. With more,
    // Megatron shuffles the epochs' sequences together, so it is the whole index that covers
    // every token (each sequence appears E times and only the last epoch has a tail).
    const int64_t E = (*ds)->index().num_epochs;
    std::set<int32_t> seen;
    std::vector<int32_t> buf(S + 1);
    std::vector<int64_t> where((*ds)->size());
    for (int64_t i = 0; i < (*ds)->size(); ++i) {
      where[(*ds)->index().shuffle_idx[i]] = i;  // sample_idx row -> shuffled position
    }
    int32_t prev_last = -1;
    for (int64_t j = 0; j < (*ds)->size(); ++j) {
      // CHECKs that it writes exactly S + 1 tokens.
      EXPECT_TRUE((*ds)->sample(where[j], buf.data()).ok());
      // Consecutive samples (in sample_idx order) share exactly one token.
      if (j > 0) {
        EXPECT_EQ(buf[0], prev_last) << "sample row " << j;
      }
      prev_last = buf[S];
      seen.insert(buf.begin(), buf.end());
    }
    const int64_t first_token = std::accumulate(lengths.begin(), lengths.begin() + begin, 0);
    // Every token of the split is in some sample, except, with one epoch, at most the S - 1
    // tokens of the tail where no full sample fits; nothing outside the split is.
    if (E == 1) {
      EXPECT_GE(static_cast<int64_t>(seen.size()), tokens - (S - 1));
    } else {
      EXPECT_EQ(static_cast<int64_t>(seen.size()), tokens);
    }
    for (int32_t t : seen) {
      EXPECT_GE(t, first_token);
      EXPECT_LT(t, first_token + tokens);
    }
    if (S == 1) {
      EXPECT_EQ(static_cast<int64_t>(seen.size()), tokens);
    }
  }
}

TEST(GptDataset, CorruptPartialOrStaleCacheIsRebuilt) {
  const GptCase c = all_cases()[0];
  ScratchDir dir;
  const std::string prefix = copy_dataset(dir, c.dataset);
  ASSERT_NE(open_case(prefix, c, c.options()), nullptr);  // writes the cache
  // The reference is kept in memory: the test overwrites cache files in place, under any mmap.
  GptDatasetOptions in_memory = c.options();
  in_memory.use_cache = false;
  auto reference = open_case(prefix, c, in_memory);
  ASSERT_NE(reference, nullptr);
  const std::string doc = dir.file(c.file(kSuffixes[0]));
  const std::string sample = dir.file(c.file(kSuffixes[1]));
  const std::string shuffle = dir.file(c.file(kSuffixes[2]));
  const std::string good_shuffle = read_file(shuffle);
  const std::string good_sample = read_file(sample);

  auto expect_rebuilt = [&](const char* what) {
    SCOPED_TRACE(what);
    auto ds = open_case(prefix, c, c.options());
    ASSERT_NE(ds, nullptr);
    EXPECT_FALSE(ds->loaded_from_cache());
    expect_index_equal(ds->index(), reference->index());
    // ... and the rebuilt cache is good again.
    auto again = open_case(prefix, c, c.options());
    ASSERT_NE(again, nullptr);
    EXPECT_TRUE(again->loaded_from_cache());
    EXPECT_EQ(read_file(shuffle), good_shuffle);
    EXPECT_EQ(read_file(sample), good_sample);
  };

  write_file(shuffle, good_shuffle.substr(0, good_shuffle.size() - 4));
  expect_rebuilt("truncated data");
  write_file(shuffle, "garbage");
  expect_rebuilt("garbage");
  std::string bad_header = good_shuffle;
  bad_header.replace(bad_header.find("<u4"), 3, ">f8");
  write_file(shuffle, bad_header);
  expect_rebuilt("bad dtype");
  std::remove(sample.c_str());
  expect_rebuilt("one file missing");
  // A well-formed file whose contents are not an index: shuffle_idx not a permutation.
  std::vector<uint32_t> zeros(reference->size(), 0);
  ASSERT_TRUE(write_npy(shuffle, NpyDType::kU32, {reference->size()}, zeros.data()).ok());
  expect_rebuilt("not a permutation");
  // sample_idx rows that do not span seq_len + 1 tokens.
  std::string shifted = good_sample;
  shifted[shifted.size() - 4] ^= 1;  // the last row's offset
  write_file(sample, shifted);
  expect_rebuilt("wrong sample span");
  // Stale: the same file names from another split range (Megatron's names omit the range).
  GptCase other = c;
  other.begin = 1;
  ASSERT_NE(open_case(prefix, other, other.options()), nullptr);  // overwrites the cache
  expect_rebuilt("stale");
  EXPECT_EQ(read_file(doc), read_file(gpt_expected(c.file(kSuffixes[0]))));
}

TEST(GptDataset, CacheDirAndUnwritableCache) {
  const GptCase c = all_cases()[0];
  ScratchDir dir;
  const std::string prefix = copy_dataset(dir, c.dataset);
  GptDatasetOptions o = c.options();
  o.cache_dir = dir.file("cache/sub");
  auto ds = open_case(prefix, c, o);
  ASSERT_NE(ds, nullptr);
  EXPECT_TRUE(file_exists(dir.file("cache/sub/" + c.file(kSuffixes[2]))));
  EXPECT_FALSE(file_exists(dir.file(c.file(kSuffixes[2]))));
  EXPECT_TRUE(open_case(prefix, c, o)->loaded_from_cache());

  // A cache directory that cannot be created (below a regular file): warn, keep in memory.
  write_file(dir.file("plain"), "x");
  o.cache_dir = dir.file("plain/sub");
  auto mem = open_case(prefix, c, o);
  ASSERT_NE(mem, nullptr);
  expect_index_equal(mem->index(), ds->index());

  o.cache_dir.clear();
  o.use_cache = false;
  auto none = open_case(prefix, c, o);
  ASSERT_NE(none, nullptr);
  EXPECT_FALSE(file_exists(dir.file(c.file(kSuffixes[0]))));
  expect_samples(*none, c.id);
}

TEST(GptDataset, TemporariesOfAKilledBuildAreRemovedAndLogged) {
  const GptCase c = all_cases()[0];
  ScratchDir dir;
  const std::string prefix = copy_dataset(dir, c.dataset);
  // A build killed while saving left "<cache file>.tmp.<pid>.<n>", its pid now dead.
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  const std::string stale = dir.file(c.file(kSuffixes[1])) + ".tmp." + std::to_string(pid) + ".0";
  write_file(stale, "partial");
  ::testing::internal::CaptureStderr();
  auto ds = open_case(prefix, c, c.options());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(ds, nullptr);
  EXPECT_FALSE(file_exists(stale));
  EXPECT_NE(log.find("removed " + stale + ", left by an interrupted index build"),
            std::string::npos)
      << log;
  expect_samples(*ds, c.id);
}

TEST(GptDataset, ConcurrentBuildersAgree) {
  const GptCase c = all_cases()[2];
  ScratchDir dir;
  const std::string prefix = copy_dataset(dir, c.dataset);
  std::vector<std::unique_ptr<GptDataset>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { got[t] = open_case(prefix, c, c.options()); });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) {
    ASSERT_NE(g, nullptr);
    expect_index_equal(g->index(), got[0]->index());
  }
  for (const char* suffix : kSuffixes) {
    EXPECT_EQ(read_file(dir.file(c.file(suffix))), read_file(gpt_expected(c.file(suffix))));
  }
}

TEST(GptDataset, NumEpochsMatchesMegatronsLoopWithoutOverflow) {
  for (int64_t T : {2, 3, 17, 1000, 123457}) {
    for (int64_t S : {1, 2, 31, 1024}) {
      for (int64_t N : {0, 1, 5, 999, 100000}) {
        int64_t e = 0, total = 0;
        do {
          ++e;
          total += T;
        } while ((total - 1) / S < N);
        ASSERT_EQ(gpt_num_epochs(T, S, N), e) << T << " " << S << " " << N;
      }
    }
  }
  // 2^40 samples of 2^20 tokens from a 3-token epoch: N*S overflows nothing in 128 bits.
  EXPECT_EQ(gpt_num_epochs(3, int64_t{1} << 20, int64_t{1} << 40),
            ((int64_t{1} << 60) + 1 + 2) / 3);
}

TEST(GptDataset, Errors) {
  const GptCase c = all_cases()[0];
  ScratchDir dir;
  const std::string prefix = copy_dataset(dir, c.dataset);
  auto data = IndexedDataset::open(prefix);
  ASSERT_TRUE(data.ok());
  std::shared_ptr<const IndexedDataset> shared(std::move(*data));
  GptDatasetOptions o = c.options();
  o.use_cache = false;
  EXPECT_EQ(GptDataset::create(shared, prefix, 5, 5, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GptDataset::create(shared, prefix, 0, 100000, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.seq_len = 0;
  EXPECT_EQ(GptDataset::create(shared, prefix, 0, 10, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Fewer than seq_len + 1 tokens: not one sample per epoch (Megatron asserts).
  const std::string tiny = write_positions_dataset(dir, {1, 5});
  auto td = IndexedDataset::open(tiny);
  ASSERT_TRUE(td.ok());
  std::shared_ptr<const IndexedDataset> tiny_data(std::move(*td));
  o.seq_len = 4;
  EXPECT_EQ(GptDataset::create(tiny_data, tiny, 0, 1, o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.seq_len = 6;
  EXPECT_EQ(GptDataset::create(tiny_data, tiny, 0, 2, o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.seq_len = 5;  // exactly one sample per epoch
  auto one = GptDataset::create(tiny_data, tiny, 0, 2, o);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->index().num_epochs, 42);  // ceil((50 * 5 + 1) / 6)
  EXPECT_GE((*one)->size(), 50);
  // T = 2S, N = 3: Megatron's assert (2 last-epoch samples, 1 per epoch) stops the run; anvil
  // builds the index with one joint shuffle.
  o.seq_len = 3;
  o.num_samples = 3;
  auto twice = GptDataset::create(tiny_data, tiny, 0, 2, o);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ((*twice)->index().num_epochs, 2);
  EXPECT_FALSE((*twice)->index().separate_last_epoch);
  std::vector<int32_t> buf(4);
  for (int64_t i = 0; i < (*twice)->size(); ++i) EXPECT_TRUE((*twice)->sample(i, buf.data()).ok());
}

}  // namespace
}  // namespace anvil::io
