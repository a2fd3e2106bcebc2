// Megatron's BERT/T5 sample mapping: build, validate, cache (see sentence_mapping.h).
#include "io/sentence_mapping.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/gpt_dataset.h"  // token_ids_cache_path
#include "io/index_cache.h"

namespace anvil::io {
namespace {

constexpr int32_t kLongSentenceLen = 512;  // helpers.cpp LONG_SENTENCE_LEN

// helpers.cpp: round(1 / short_seq_prob) with C's round (half away from zero); 0 = never short.
int32_t short_seq_ratio(double short_seq_prob) {
  if (short_seq_prob <= 0.0) return 0;
  return static_cast<int32_t>(std::round(1.0 / short_seq_prob));
}

// helpers.cpp get_target_sample_len: one draw per call when the ratio is non-zero.
int32_t target_sample_len(int32_t ratio, int32_t max_length, std::mt19937* gen) {
  if (ratio == 0) return max_length;
  const uint32_t r = static_cast<uint32_t>((*gen)());
  if (r % static_cast<uint32_t>(ratio) == 0) {
    return static_cast<int32_t>(2 + r % static_cast<uint32_t>(max_length - 1));
  }
  return max_length;
}

// Whether helpers.cpp keeps document d (sentences [first, last)).
bool keeps_document(const std::vector<int32_t>& sizes, int64_t first, int64_t last,
                    int32_t min_num_sent) {
  const int64_t n = last - first;
  if (n < min_num_sent) return false;
  if (n > 1) {
    for (int64_t s = first; s < last; ++s) {
      if (sizes[s] > kLongSentenceLen) return false;
    }
  }
  return true;
}

bool needs_u64(const IndexedDataset& data) {
  return data.num_sequences() > int64_t{std::numeric_limits<uint32_t>::max()};
}

template <typename T>
NpyArray shuffled_rows(NpyDType dtype, const std::vector<int64_t>& flat, int32_t seed) {
  const int64_t n = static_cast<int64_t>(flat.size()) / 3;
  std::vector<T> rows(flat.begin(), flat.end());
  // A 64-bit generator, as Megatron's (more than 2^31 rows are possible), seeded with the int
  // seed + 1: wrapped to -2^31 and sign-extended for seed = 2^31 - 1, as Megatron's build does.
  const int32_t seed1 = static_cast<int32_t>(static_cast<uint32_t>(seed) + 1u);
  std::mt19937_64 gen(static_cast<uint64_t>(static_cast<int64_t>(seed1)));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(gen() % static_cast<uint64_t>(i + 1));
    for (int k = 0; k < 3; ++k) std::swap(rows[3 * i + k], rows[3 * j + k]);
  }
  return NpyArray::from_vector(dtype, {n, 3}, std::move(rows));
}

// The shortest decimal that reads back to v (0.1 -> "0.1").
std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace

absl::Status check_sentence_mapping(const IndexedDataset& data, int64_t doc_begin, int64_t doc_end,
                                    const SentenceMappingOptions& opt) {
  const int64_t docs = data.num_documents();
  if (doc_begin < 0 || doc_begin >= doc_end || doc_end > docs) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sample mapping: document range [%d, %d) is empty or outside [0, %d)",
                        doc_begin, doc_end, docs));
  }
  if (opt.num_samples < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sample mapping: num_samples is %d, expected >= 1 (Megatron's max_num_samples)",
        opt.num_samples));
  }
  if (opt.max_length < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sample mapping: target length %d is below 2 (max_seq_length too small)", opt.max_length));
  }
  if (!(opt.short_seq_prob >= 0.0 && opt.short_seq_prob <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample mapping: short_seq_prob ", opt.short_seq_prob, " is not in [0, 1]"));
  }
  if (opt.seed <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample mapping: seed ", opt.seed, " must be > 0 (Megatron's helpers.cpp asserts it)"));
  }
  if (opt.min_num_sent != 1 && opt.min_num_sent != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample mapping: min_num_sent ", opt.min_num_sent, " must be 1 or 2"));
  }
  const std::vector<int64_t>& doc_idx = data.doc_idx();
  for (int64_t d = doc_begin; d < doc_end; ++d) {
    if (keeps_document(data.sizes(), doc_idx[d], doc_idx[d + 1], opt.min_num_sent)) {
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "sample mapping: none of documents [%d, %d) has %d or more sentences without one over %d "
      "tokens, so no sample can be made (is the data sentence-split? preprocess with "
      "--split-sentences)",
      doc_begin, doc_end, opt.min_num_sent, kLongSentenceLen));
}

absl::StatusOr<NpyArray> build_sentence_mapping(const IndexedDataset& data, int64_t doc_begin,
                                                int64_t doc_end,
                                                const SentenceMappingOptions& opt) {
  ANVIL_RETURN_IF_ERROR(check_sentence_mapping(data, doc_begin, doc_end, opt));
  const std::vector<int32_t>& sizes = data.sizes();
  const std::vector<int64_t>& doc_idx = data.doc_idx();
  const int32_t ratio = short_seq_ratio(opt.short_seq_prob);
  std::mt19937 gen(static_cast<uint32_t>(opt.seed));
  std::vector<int64_t> flat;  // rows (start, end, target), before the shuffle
  int64_t rows = 0;
  // Megatron's num_epochs is 2^31 - 2; the check above guarantees rows grow every epoch.
  while (rows < opt.num_samples) {
    for (int64_t d = doc_begin; d < doc_end; ++d) {
      const int64_t first = doc_idx[d], last = doc_idx[d + 1];
      if (!keeps_document(sizes, first, last, opt.min_num_sent)) continue;
      int64_t prev_start = first;
      int64_t remain = last - first;
      int64_t seq_len = 0;
      int32_t num_sent = 0;
      int32_t target = target_sample_len(ratio, opt.max_length, &gen);
      for (int64_t s = first; s < last; ++s) {
        seq_len += sizes[s];
        ++num_sent;
        --remain;
        if ((seq_len >= target && remain > 1 && num_sent >= opt.min_num_sent) || remain == 0) {
          flat.insert(flat.end(), {prev_start, s + 1, target});
          ++rows;
          prev_start = s + 1;
          target = target_sample_len(ratio, opt.max_length, &gen);
          seq_len = 0;
          num_sent = 0;
        }
      }
    }
  }
  if (needs_u64(data)) return shuffled_rows<uint64_t>(NpyDType::kU64, flat, opt.seed);
  return shuffled_rows<uint32_t>(NpyDType::kU32, flat, opt.seed);
}

absl::Status validate_sentence_mapping(const NpyArray& m, const IndexedDataset& data,
                                       int64_t doc_begin, int64_t doc_end,
                                       const SentenceMappingOptions& opt) {
  ANVIL_RETURN_IF_ERROR(check_sentence_mapping(data, doc_begin, doc_end, opt));
  const NpyDType want = needs_u64(data) ? NpyDType::kU64 : NpyDType::kU32;
  if (m.dtype() != want) {
    return absl::DataLossError(absl::StrCat("the mapping's dtype is ", npy_descr(m.dtype()),
                                            ", expected ", npy_descr(want)));
  }
  if (m.shape().size() != 2 || m.shape()[1] != 3 || m.shape()[0] < opt.num_samples) {
    return absl::DataLossError(
        absl::StrFormat("the mapping has %d dimension(s) and %d elements, expected [n >= %d, 3]",
                        m.shape().size(), m.size(), opt.num_samples));
  }
  const std::vector<int64_t>& doc_idx = data.doc_idx();
  const auto doc_first = doc_idx.begin() + doc_begin;
  const auto doc_last = doc_idx.begin() + doc_end + 1;
  const int32_t min_target = opt.short_seq_prob > 0.0 ? 2 : opt.max_length;
  for (int64_t i = 0; i < m.shape()[0]; ++i) {
    const int64_t start = m[3 * i], end = m[3 * i + 1], target = m[3 * i + 2];
    // The document holding `start`: the last boundary <= start.
    const auto it = std::upper_bound(doc_first, doc_last, start);
    const bool inside = start >= *doc_first && it != doc_last && start < end && end <= *it;
    if (!inside || target < min_target || target > opt.max_length) {
      return absl::DataLossError(absl::StrFormat(
          "mapping row %d (%d, %d, %d) is not sentences of one document of [%d, %d) with a "
          "target in [%d, %d]",
          i, start, end, target, doc_begin, doc_end, min_target, opt.max_length));
    }
  }
  return absl::OkStatus();
}

std::string sentence_mapping_path(const std::string& data_prefix, int64_t doc_begin,
                                  int64_t doc_end, const SentenceMappingOptions& opt,
                                  const MappingCacheOptions& cache) {
  return absl::StrCat(index_cache_base(data_prefix, cache.cache_dir), "_", cache.name, "_indexmap_",
                      opt.num_samples, "mns_", opt.max_length, "msl_", shortest(opt.short_seq_prob),
                      "ssp_", opt.seed, "s_", opt.min_num_sent, "mins_", doc_begin, "-", doc_end,
                      "docs.npy");
}

absl::StatusOr<SentenceMapping> SentenceMapping::create(const IndexedDataset& data,
                                                        const std::string& data_prefix,
                                                        int64_t doc_begin, int64_t doc_end,
                                                        const SentenceMappingOptions& opt,
                                                        const MappingCacheOptions& cache) {
  ANVIL_RETURN_IF_ERROR(check_sentence_mapping(data, doc_begin, doc_end, opt));
  SentenceMapping out;
  if (cache.use_cache) {
    out.path_ = sentence_mapping_path(data_prefix, doc_begin, doc_end, opt, cache);
    auto loaded = NpyArray::open(out.path_);
    absl::Status why = loaded.status();
    if (why.ok()) why = validate_sentence_mapping(*loaded, data, doc_begin, doc_end, opt);
    if (why.ok()) {
      out.rows_ = std::move(*loaded);
      out.loaded_from_cache_ = true;
      engine::log_info(cache.log, absl::StrFormat("%s: loaded the cached sample mapping %s (%d "
                                                  "samples)",
                                                  cache.name, out.path_, out.size()));
      return out;
    }
    if (!absl::IsNotFound(why)) {
      engine::log_warning(cache.log,
                          absl::StrCat(cache.name, ": the cached sample mapping ", out.path_,
                                       " is unusable (", why.message(), "); rebuilding it"));
    }
  }
  engine::Timer timer;
  ANVIL_ASSIGN_OR_RETURN(out.rows_, build_sentence_mapping(data, doc_begin, doc_end, opt));
  std::string where = "kept in memory";
  if (cache.use_cache) {
    const absl::Status w =
        write_index_cache({{out.path_, &out.rows_}}, cache.cache_dir, cache.name, cache.log);
    if (w.ok()) {
      where = absl::StrCat("cached as ", out.path_);
    } else {
      engine::log_warning(cache.log, absl::StrCat(cache.name, ": cannot write the mapping cache (",
                                                  w.message(), "); using the in-memory mapping"));
      out.path_.clear();
    }
  }
  engine::log_info(cache.log,
                   absl::StrFormat("%s: built the sample mapping of documents [%d, %d) (%d samples "
                                   "for %d requested) in %.2fs, %s",
                                   cache.name, doc_begin, doc_end, out.size(), opt.num_samples,
                                   timer.seconds(), where));
  return out;
}

absl::StatusOr<SentenceMapping> SentenceMapping::create_checked(
    const IndexedDataset& data, const std::string& data_prefix, int64_t doc_begin, int64_t doc_end,
    const SentenceMappingOptions& opt, const MappingCacheOptions& cache, int64_t vocab_size) {
  const std::string ids_cache =
      cache.use_cache ? token_ids_cache_path(data_prefix, cache.cache_dir) : std::string();
  ANVIL_RETURN_IF_ERROR(data.check_token_ids(vocab_size, ids_cache));
  return create(data, data_prefix, doc_begin, doc_end, opt, cache);
}

absl::Status read_sentences(const IndexedDataset& data, int64_t start, int64_t end,
                            std::vector<std::vector<int32_t>>* out) {
  out->resize(static_cast<size_t>(end - start));
  for (int64_t s = start; s < end; ++s) {
    std::vector<int32_t>& sentence = (*out)[s - start];
    sentence.resize(static_cast<size_t>(data.sizes()[s]));
    ANVIL_RETURN_IF_ERROR(data.read(s, 0, data.sizes()[s], sentence.data()));
  }
  return absl::OkStatus();
}

}  // namespace anvil::io
