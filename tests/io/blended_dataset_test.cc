// Megatron's blending (helpers.cpp build_blending_indices via BlendableDataset's weights) and the
// train/valid/test assembly: identical indices and per-dataset sample counts to the numpy
// re-implementation (scripts/make_gpt_index_fixture.py), realized shares within 1% of the
// weights, a blended corpus end to end (samples and cache files), Megatron's split sample counts.
#include "io/blended_dataset.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/io/gpt_index_fixture.h"

namespace anvil::io {
namespace {

using testing::gpt_cases;
using testing::gpt_expected;
using testing::gpt_fixture_dir;
using testing::load_expected;
using testing::read_file;
using testing::ScratchDir;
using testing::write_file;

struct BlendCase {
  std::string name;
  int64_t size;
  std::vector<double> raw;  // as written in --data-path
};

std::vector<BlendCase> blend_cases() {
  std::vector<BlendCase> out;
  for (const auto& c : gpt_cases("blend")) {
    BlendCase b{c[1], std::stoll(c[2]), {}};
    for (size_t k = 3; k < c.size(); ++k) b.raw.push_back(std::stod(c[k]));
    out.push_back(b);
  }
  return out;
}

TEST(Blend, IndexMatchesMegatron) {
  for (const BlendCase& c : blend_cases()) {
    SCOPED_TRACE(c.name);
    // Megatron normalizes in Python (get_datasets_weights_and_num_samples), then BlendableDataset
    // normalizes again with numpy.
    const std::vector<double> w = megatron_normalize_weights(c.raw);
    auto b = BlendIndex::build(w, c.size);
    ASSERT_TRUE(b.ok()) << b.status();
    const NpyArray di = load_expected("blend_" + c.name + "_dataset_index.npy");
    const NpyArray dsi = load_expected("blend_" + c.name + "_dataset_sample_index.npy");
    ASSERT_EQ(di.size(), c.size);
    for (int64_t i = 0; i < c.size; ++i) {
      ASSERT_EQ(b->dataset(i), di[i]) << "position " << i;
      ASSERT_EQ(b->dataset_sample(i), dsi[i]) << "position " << i;
    }
    // Each dataset is asked for ceil(n * w * 1.005) samples.
    const NpyArray want = load_expected("blend_" + c.name + "_num_samples.npy");
    for (size_t d = 0; d < w.size(); ++d) {
      EXPECT_EQ(megatron_blend_samples(c.size, w[d]), want[d]) << "dataset " << d;
    }
  }
}

TEST(Blend, RealizedSharesFollowTheWeights) {
  for (const BlendCase& c : blend_cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<double> w = megatron_normalize_weights(c.raw);
    auto b = BlendIndex::build(w, c.size);
    ASSERT_TRUE(b.ok());
    for (int64_t n : {c.size / 3, c.size}) {
      const std::vector<int64_t> got = b->counts(n);
      for (size_t d = 0; d < w.size(); ++d) {
        const double expected = w[d] * static_cast<double>(n);
        // The greedy rule never lags or leads a weight by more than one sample...
        EXPECT_LE(std::abs(static_cast<double>(got[d]) - expected), 1.0 + 1e-9)
            << "dataset " << d << " n " << n;
        // ... so with 100+ expected samples the share is within 1% of the weight.
        if (expected >= 100) {
          EXPECT_LE(std::abs(static_cast<double>(got[d]) / expected - 1.0), 0.01);
        }
      }
    }
  }
}

TEST(Blend, PairwiseSumIsNumpys) {
  // np.sum(np.full(n, 0.1)) for n = 3, 10, 130 (sequential below 8, pairwise above).
  std::vector<double> a(130, 0.1);
  EXPECT_EQ(numpy_pairwise_sum(a.data(), 3), 0.30000000000000004);
  EXPECT_EQ(numpy_pairwise_sum(a.data(), 10), 1.0);  // sequential: 0.9999999999999999
  EXPECT_EQ(numpy_pairwise_sum(a.data(), 130), 12.999999999999998);
}

TEST(Blend, Errors) {
  EXPECT_FALSE(BlendIndex::build({}, 10).ok());
  EXPECT_FALSE(BlendIndex::build({0.0, 0.0}, 10).ok());
  EXPECT_FALSE(BlendIndex::build({1.0, -1.0}, 10).ok());
  EXPECT_FALSE(BlendIndex::build(std::vector<double>(255, 1.0), 10).ok());
  EXPECT_TRUE(BlendIndex::build(std::vector<double>(254, 1.0), 10).ok());
}

TEST(SplitSamples, MegatronsCounts) {
  // train_iters 1000, GBS 32, eval_interval 100, eval_iters 10.
  const auto n = megatron_split_samples(1000, 32, 100, 10);
  EXPECT_EQ(n[0], 32000);
  EXPECT_EQ(n[1], (1000 / 100 + 1) * 10 * 32);
  EXPECT_EQ(n[2], 320);
  EXPECT_EQ(megatron_split_samples(5, 8, 0, 2)[1], 16);  // eval_interval 0: one evaluation
}

std::string copy_dataset(const ScratchDir& dir, const std::string& name) {
  for (const char* ext : {".bin", ".idx"}) {
    write_file(dir.file(name + ext), read_file(gpt_fixture_dir() + "/" + name + ext));
  }
  return dir.file(name);
}

TEST(GptCorpus, BlendedCorpusMatchesMegatron) {
  const auto c = gpt_cases("corpus")[0];  // corpus P1 W1 P2 W2 SPLIT N SEQ_LEN SEED
  ScratchDir dir;
  const std::vector<GptDataSource> sources = {{std::stod(c[2]), copy_dataset(dir, c[1])},
                                              {std::stod(c[4]), copy_dataset(dir, c[3])}};
  auto corpus = GptCorpus::open(sources, /*weighted=*/true, c[5]);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const int64_t n = std::stoll(c[6]);
  GptDatasetOptions o;
  o.seq_len = std::stoll(c[7]);
  o.seed = static_cast<uint32_t>(std::stoull(c[8]));
  auto train = corpus->build_split(0, n, o);
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ((*train)->size(), n);
  const NpyArray want = load_expected("corpus_samples.npy");
  const int64_t S1 = o.seq_len + 1;
  ASSERT_EQ(want.size(), n * S1);
  std::vector<int32_t> got(S1);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE((*train)->sample(i, got.data()).ok());
    for (int64_t t = 0; t < S1; ++t) ASSERT_EQ(got[t], want[i * S1 + t]) << i << " " << t;
  }
  // Each source's cache has Megatron's name, with ceil(n * w * 1.005) samples, and content.
  const std::vector<double> w = megatron_normalize_weights({sources[0].weight, sources[1].weight});
  for (size_t k = 0; k < 2; ++k) {
    const std::string name = std::string(k == 0 ? c[1] : c[3]) + "_train_indexmap_" +
                             std::to_string(megatron_blend_samples(n, w[k])) + "ns_" + c[7] +
                             "sl_" + c[8] + "s_shuffle_idx.npy";
    EXPECT_EQ(read_file(dir.file(name)), read_file(gpt_expected(name))) << name;
  }
  // Built again: from the caches, same samples.
  auto again = corpus->build_split(0, n, o);
  ASSERT_TRUE(again.ok());
  for (const auto& d : (*again)->datasets()) EXPECT_TRUE(d->loaded_from_cache());
  EXPECT_TRUE((*again)->sample(n - 1, got.data()).ok());
  for (int64_t t = 0; t < S1; ++t) ASSERT_EQ(got[t], want[(n - 1) * S1 + t]);
}

TEST(GptCorpus, SingleSourceAndSplitErrors) {
  ScratchDir dir;
  const std::string a = copy_dataset(dir, "synth_a");
  auto corpus = GptCorpus::open({{1.0, a}}, /*weighted=*/false, "969,30,1");
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ(corpus->range(0, 0), std::make_pair(int64_t{0}, int64_t{116}));
  EXPECT_EQ(corpus->range(0, 2), std::make_pair(int64_t{120}, int64_t{120}));
  GptDatasetOptions o;
  o.seq_len = 32;
  o.use_cache = false;
  auto train = corpus->build_split(0, 50, o);
  ASSERT_TRUE(train.ok());
  EXPECT_EQ((*train)->blend_index(), nullptr);
  EXPECT_EQ((*train)->size(), (*train)->datasets()[0]->size());  // all of Megatron's M samples
  // The test split is empty: an error naming the split and the source.
  auto test = corpus->build_split(2, 10, o);
  ASSERT_FALSE(test.ok());
  EXPECT_NE(std::string(test.status().message()).find("test split of " + a), std::string::npos)
      << test.status();
  // A separate validation set covers every sequence.
  auto whole = corpus->build_whole(10, o);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->datasets()[0]->index().doc_idx.size(), 120);
  EXPECT_FALSE(GptCorpus::open({{1.0, a}, {1.0, a}}, /*weighted=*/false, "1").ok());
  EXPECT_FALSE(GptCorpus::open({{1.0, dir.file("missing")}}, false, "1").ok());
}

}  // namespace
}  // namespace anvil::io
