// GPT train/valid/test splits and the simple sample stream (io/gpt_samples.h).
//
// Epoch e of a stream: the documents of the range are shuffled with mt19937_64(seed + e) and
// concatenated (T tokens); sample s of the epoch is tokens [s*S, s*S + S] of that
// concatenation (S = seq_len), for s < (T - 1) / S; the epoch's samples are then permuted
// with the same generator. mt19937_64's output sequence is fixed by the C++ standard and the
// bounded draws below are our own (std::uniform_int_distribution is implementation-defined),
// so the order is the same with every compiler and standard library.
#include "io/gpt_samples.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/status.h"

namespace anvil::io {
namespace {

// Uniform integer in [0, range) without modulo bias (rejects the short last block).
uint64_t uniform_below(std::mt19937_64& gen, uint64_t range) {
  const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
  while (true) {
    const uint64_t r = gen();
    if (r >= threshold) return r % range;
  }
}

template <typename T>
void fisher_yates(std::vector<T>& v, std::mt19937_64& gen) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(uniform_below(gen, i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

// Megatron's get_train_valid_test_split_: weights split on ',' or '/', padded with zeros to
// three, normalized; boundary k+1 = boundary k + round(w_k * N) with Python's round (ties to
// even, as nearbyint in the default rounding mode); then every boundary is shifted so the last
// one is N. Unlike Megatron, boundaries are clamped to [0, N] and kept monotonic, so a
// rounding shift can never yield a negative start.
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> split_documents(const std::string& split,
                                                                         int64_t num_documents) {
  if (num_documents < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("split: negative document count ", num_documents));
  }
  const char sep = split.find(',') != std::string::npos ? ',' : '/';
  std::vector<std::string> parts = absl::StrSplit(split, sep);
  if (parts.size() > 3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "split \"%s\": %d weights, expected at most 3 (train, valid, test)", split, parts.size()));
  }
  std::vector<double> weights;
  for (std::string& p : parts) {
    absl::StripAsciiWhitespace(&p);
    double w = 0;
    if (!absl::SimpleAtod(p, &w) || !std::isfinite(w) || w < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("split \"%s\": \"%s\" is not a non-negative number", split, p));
    }
    weights.push_back(w);
  }
  while (weights.size() < 3) weights.push_back(0.0);
  const double sum = weights[0] + weights[1] + weights[2];
  if (!(sum > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat("split \"%s\": the weights sum to 0", split));
  }
  int64_t index[4] = {0, 0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    const double share = weights[k] / sum;
    index[k + 1] =
        index[k] + static_cast<int64_t>(std::nearbyint(share * static_cast<double>(num_documents)));
  }
  const int64_t diff = index[3] - num_documents;
  for (int k = 1; k < 4; ++k) {
    index[k] = std::clamp<int64_t>(index[k] - diff, index[k - 1], num_documents);
  }
  index[3] = num_documents;
  return std::vector<std::pair<int64_t, int64_t>>{
      {index[0], index[1]}, {index[1], index[2]}, {index[2], index[3]}};
}

struct GptSampleStream::EpochCache {
  static constexpr size_t kKeep = 2;  // current and previous epoch (readers straddle a boundary)
  std::mutex mu;
  std::vector<std::shared_ptr<const Epoch>> recent;  // most recently used first
};

absl::StatusOr<GptSampleStream> GptSampleStream::create(const IndexedDataset* data,
                                                        int64_t doc_begin, int64_t doc_end,
                                                        int64_t seq_len, uint64_t seed) {
  if (data == nullptr) return absl::InvalidArgumentError("GptSampleStream: null dataset");
  if (doc_begin < 0 || doc_begin > doc_end || doc_end > data->num_documents()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GptSampleStream: document range [%d, %d) outside [0, %d)", doc_begin,
                        doc_end, data->num_documents()));
  }
  if (seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GptSampleStream: seq_len %d must be positive", seq_len));
  }
  GptSampleStream s;
  s.data_ = data;
  s.doc_begin_ = doc_begin;
  s.seq_len_ = seq_len;
  s.seed_ = seed;
  const std::vector<int64_t>& doc_idx = data->doc_idx();
  const std::vector<int32_t>& sizes = data->sizes();
  int64_t total = 0;
  s.doc_tokens_.resize(doc_end - doc_begin);
  for (int64_t d = doc_begin; d < doc_end; ++d) {
    int64_t n = 0;
    for (int64_t q = doc_idx[d]; q < doc_idx[d + 1]; ++q) n += sizes[q];
    s.doc_tokens_[d - doc_begin] = n;
    total += n;
  }
  if (total < seq_len + 1) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "GptSampleStream: documents [%d, %d) hold %d tokens, fewer than seq_len + 1 = %d",
        doc_begin, doc_end, total, seq_len + 1));
  }
  s.samples_per_epoch_ = (total - 1) / seq_len;
  s.cache_ = std::make_shared<EpochCache>();
  s.cache_->recent.push_back(s.build_epoch(0));
  return s;
}

std::shared_ptr<const GptSampleStream::Epoch> GptSampleStream::build_epoch(int64_t epoch) const {
  auto e = std::make_shared<Epoch>();
  e->epoch = epoch;
  std::mt19937_64 gen(seed_ + static_cast<uint64_t>(epoch));
  const int64_t docs = static_cast<int64_t>(doc_tokens_.size());
  e->doc_order.resize(docs);
  for (int64_t i = 0; i < docs; ++i) e->doc_order[i] = doc_begin_ + i;
  fisher_yates(e->doc_order, gen);
  e->doc_start.resize(docs + 1);
  e->doc_start[0] = 0;
  for (int64_t i = 0; i < docs; ++i) {
    e->doc_start[i + 1] = e->doc_start[i] + doc_tokens_[e->doc_order[i] - doc_begin_];
  }
  e->sample_order.resize(samples_per_epoch_);
  for (int64_t i = 0; i < samples_per_epoch_; ++i) e->sample_order[i] = i;
  fisher_yates(e->sample_order, gen);
  return e;
}

std::shared_ptr<const GptSampleStream::Epoch> GptSampleStream::epoch_layout(int64_t epoch) const {
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto& recent = cache_->recent;
    for (size_t i = 0; i < recent.size(); ++i) {
      if (recent[i]->epoch == epoch) {
        std::rotate(recent.begin(), recent.begin() + i, recent.begin() + i + 1);
        return recent.front();
      }
    }
  }
  // Build outside the lock (it is O(docs + samples)); a racing thread may build the same
  // epoch too, which is harmless: both layouts are identical.
  std::shared_ptr<const Epoch> built = build_epoch(epoch);
  std::lock_guard<std::mutex> lock(cache_->mu);
  auto& recent = cache_->recent;
  recent.insert(recent.begin(), built);
  if (recent.size() > EpochCache::kKeep) recent.resize(EpochCache::kKeep);
  return built;
}

void GptSampleStream::sample(int64_t index, int32_t* out) const {
  ANVIL_CHECK_MSG(index >= 0, absl::StrCat("GptSampleStream::sample: negative index ", index));
  const std::shared_ptr<const Epoch> e = epoch_layout(index / samples_per_epoch_);
  const int64_t id = e->sample_order[index % samples_per_epoch_];
  const int64_t start = id * seq_len_;  // token offset in this epoch's concatenation
  // Shuffled document k holds concatenation tokens [doc_start[k], doc_start[k+1]).
  int64_t k =
      std::upper_bound(e->doc_start.begin(), e->doc_start.end(), start) - e->doc_start.begin() - 1;
  int64_t offset = start - e->doc_start[k];  // token offset inside document k
  int64_t remaining = seq_len_ + 1;
  const std::vector<int64_t>& doc_idx = data_->doc_idx();
  const std::vector<int32_t>& sizes = data_->sizes();
  while (remaining > 0) {
    ANVIL_CHECK(k < static_cast<int64_t>(e->doc_order.size()));
    const int64_t d = e->doc_order[k];
    for (int64_t q = doc_idx[d]; q < doc_idx[d + 1] && remaining > 0; ++q) {
      if (offset >= sizes[q]) {  // skip whole sequences before the start
        offset -= sizes[q];
        continue;
      }
      const int64_t n = std::min<int64_t>(remaining, sizes[q] - offset);
      data_->read(q, offset, n, out);
      out += n;
      remaining -= n;
      offset = 0;
    }
    ++k;
    offset = 0;
  }
}

}  // namespace anvil::io
