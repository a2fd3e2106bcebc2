// Megatron's GPT index: build, validate, cache, read (see gpt_dataset.h).
#include "io/gpt_dataset.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/index_cache.h"
#include "io/numpy_random.h"

namespace anvil::io {
namespace {

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

// _build_doc_idx(documents, num_epochs, np_rng, separate_last_epoch=False): the sequence ids
// [begin, end) tiled `epochs` times (epoch-major, as np.mgrid[0:E, 0:docs][1]), shuffled.
template <typename D>
void append_shuffled_epochs(std::vector<D>* out, int64_t begin, int64_t end, int64_t epochs,
                            NumpyRandomState* rng) {
  const size_t start = out->size();
  for (int64_t e = 0; e < epochs; ++e) {
    for (int64_t s = begin; s < end; ++s) out->push_back(static_cast<D>(s));
  }
  rng->shuffle(out->data() + start, static_cast<int64_t>(out->size() - start));
}

template <typename D>
NpyArray build_doc_idx(NpyDType dtype, int64_t begin, int64_t end, int64_t epochs,
                       bool separate_last_epoch, NumpyRandomState* rng) {
  std::vector<D> doc_idx;
  doc_idx.reserve(static_cast<size_t>(epochs * (end - begin)));
  if (!separate_last_epoch || epochs == 1) {
    append_shuffled_epochs(&doc_idx, begin, end, epochs, rng);
  } else {
    append_shuffled_epochs(&doc_idx, begin, end, epochs - 1, rng);
    append_shuffled_epochs(&doc_idx, begin, end, 1, rng);
  }
  const int64_t n = static_cast<int64_t>(doc_idx.size());
  return NpyArray::from_vector(dtype, {n}, std::move(doc_idx));
}

// helpers.cpp build_sample_idx, with 64-bit counters: row k = (doc_idx position, offset) where
// sample k starts; each sample takes S+1 tokens and the next starts on its last token.
template <typename P>
NpyArray build_sample_idx(NpyDType dtype, const std::vector<int32_t>& sizes,
                          const NpyArray& doc_idx, int64_t seq_len, int64_t num_samples) {
  std::vector<P> sample_idx(static_cast<size_t>(2 * (num_samples + 1)));
  int64_t doc_idx_index = 0;
  int64_t doc_offset = 0;
  sample_idx[0] = 0;
  sample_idx[1] = 0;
  for (int64_t k = 1; k <= num_samples; ++k) {
    int64_t remaining = seq_len + 1;
    while (remaining != 0) {
      ANVIL_CHECK_MSG(doc_idx_index < doc_idx.size(), "build_sample_idx: ran past doc_idx");
      const int64_t doc_length = sizes[doc_idx[doc_idx_index]] - doc_offset;
      remaining -= doc_length;
      if (remaining <= 0) {
        // The sample ends inside this document: the next one starts on its last token (-1).
        doc_offset += remaining + doc_length - 1;
        remaining = 0;
      } else {
        ++doc_idx_index;
        doc_offset = 0;
      }
    }
    sample_idx[2 * k] = static_cast<P>(doc_idx_index);
    sample_idx[2 * k + 1] = static_cast<P>(doc_offset);
  }
  return NpyArray::from_vector(dtype, {num_samples + 1, 2}, std::move(sample_idx));
}

// _build_shuffle_idx(num_samples=first, total_size=total, np_rng).
template <typename Q>
NpyArray build_shuffle_idx(NpyDType dtype, int64_t first, int64_t total, NumpyRandomState* rng) {
  std::vector<Q> shuffle_idx(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) shuffle_idx[i] = static_cast<Q>(i);
  rng->shuffle(shuffle_idx.data(), first);
  if (first != total) rng->shuffle(shuffle_idx.data() + first, total - first);
  return NpyArray::from_vector(dtype, {total}, std::move(shuffle_idx));
}

absl::Status check_range(const std::vector<int32_t>& sizes, int64_t seq_begin, int64_t seq_end,
                         int64_t num_samples, int64_t seq_len) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  if (seq_begin < 0 || seq_begin >= seq_end || seq_end > n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GPT dataset: sequence range [%d, %d) is empty or outside [0, %d)", seq_begin, seq_end, n));
  }
  if (seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GPT dataset: seq_len %d must be positive", seq_len));
  }
  if (num_samples < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GPT dataset: negative sample count %d", num_samples));
  }
  return absl::OkStatus();
}

int64_t tokens_in(const std::vector<int32_t>& sizes, int64_t seq_begin, int64_t seq_end) {
  int64_t t = 0;
  for (int64_t s = seq_begin; s < seq_end; ++s) t += sizes[s];
  return t;
}

// Megatron's separate-last-epoch rule (see the header).
bool separate_last_epoch(int64_t tokens, int64_t epochs, int64_t seq_len, int64_t num_samples,
                         double cutoff) {
  if (epochs == 1) return false;
  const int64_t from_epochs_minus_one = ((epochs - 1) * tokens - 1) / seq_len;
  const int64_t last_epoch_samples = num_samples - from_epochs_minus_one;
  const int64_t per_epoch = (tokens - 1) / seq_len;
  ANVIL_CHECK(last_epoch_samples >= 0);
  // Megatron also asserts last_epoch_samples < per_epoch + 1, which fails when T is a multiple
  // of S (e.g. T = 2S, N = 3: 2 samples in the last epoch, 1 per epoch) and stops the run. The
  // rule below then says "not separate", which is what anvil does.
  return last_epoch_samples < static_cast<int64_t>(cutoff * static_cast<double>(per_epoch));
}

bool has_dims(const NpyArray& a, size_t dims) { return a.shape().size() == dims; }

}  // namespace

int64_t gpt_num_epochs(int64_t tokens_per_epoch, int64_t seq_len, int64_t num_samples) {
  ANVIL_CHECK(tokens_per_epoch > 1 && seq_len > 0 && num_samples >= 0);
  // (E*T - 1) // S >= N  <=>  E*T - 1 >= N*S  <=>  E >= (N*S + 1) / T.
  const __int128 need = static_cast<__int128>(num_samples) * seq_len + 1;
  const __int128 e = (need + tokens_per_epoch - 1) / tokens_per_epoch;
  return std::max<int64_t>(1, static_cast<int64_t>(e));
}

absl::StatusOr<GptIndex> build_gpt_index(const std::vector<int32_t>& sizes, int64_t seq_begin,
                                         int64_t seq_end, int64_t num_samples, int64_t seq_len,
                                         uint32_t seed, double last_epoch_cutoff) {
  ANVIL_RETURN_IF_ERROR(check_range(sizes, seq_begin, seq_end, num_samples, seq_len));
  if (!(last_epoch_cutoff > 0.0 && last_epoch_cutoff <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GPT dataset: last_epoch_cutoff %g is not in (0, 1]", last_epoch_cutoff));
  }
  GptIndex ix;
  ix.tokens_per_epoch = tokens_in(sizes, seq_begin, seq_end);
  if (ix.tokens_per_epoch <= seq_len) {
    // Megatron's assert (no sample per epoch); the epochs needed would also be unbounded.
    return absl::FailedPreconditionError(absl::StrFormat(
        "GPT dataset: sequences [%d, %d) hold %d tokens, fewer than one sample of seq_len + 1 = "
        "%d",
        seq_begin, seq_end, ix.tokens_per_epoch, seq_len + 1));
  }
  ix.num_epochs = gpt_num_epochs(ix.tokens_per_epoch, seq_len, num_samples);
  ix.separate_last_epoch = separate_last_epoch(ix.tokens_per_epoch, ix.num_epochs, seq_len,
                                               num_samples, last_epoch_cutoff);
  const int64_t docs = seq_end - seq_begin;
  const int64_t positions = ix.num_epochs * docs;
  const int64_t total = (ix.num_epochs * ix.tokens_per_epoch - 1) / seq_len;  // M

  NumpyRandomState rng(seed);
  if (seq_end - 1 <= kI32Max) {
    ix.doc_idx = build_doc_idx<int32_t>(NpyDType::kI32, seq_begin, seq_end, ix.num_epochs,
                                        ix.separate_last_epoch, &rng);
  } else {
    ix.doc_idx = build_doc_idx<int64_t>(NpyDType::kI64, seq_begin, seq_end, ix.num_epochs,
                                        ix.separate_last_epoch, &rng);
  }
  if (positions <= kI32Max) {
    ix.sample_idx = build_sample_idx<int32_t>(NpyDType::kI32, sizes, ix.doc_idx, seq_len, total);
  } else {
    ix.sample_idx = build_sample_idx<int64_t>(NpyDType::kI64, sizes, ix.doc_idx, seq_len, total);
  }
  const int64_t first =
      ix.separate_last_epoch ? ((ix.num_epochs - 1) * ix.tokens_per_epoch - 1) / seq_len : total;
  // Megatron: uint32 unless total_size >= np.iinfo(np.uint32).max - 1.
  if (total < int64_t{0xffffffff} - 1) {
    ix.shuffle_idx = build_shuffle_idx<uint32_t>(NpyDType::kU32, first, total, &rng);
  } else {
    ix.shuffle_idx = build_shuffle_idx<int64_t>(NpyDType::kI64, first, total, &rng);
  }
  return ix;
}

absl::Status validate_gpt_index(const GptIndex& ix, const std::vector<int32_t>& sizes,
                                int64_t seq_begin, int64_t seq_end, int64_t num_samples,
                                int64_t seq_len) {
  ANVIL_RETURN_IF_ERROR(check_range(sizes, seq_begin, seq_end, num_samples, seq_len));
  const int64_t tokens = tokens_in(sizes, seq_begin, seq_end);
  if (tokens <= seq_len) return absl::FailedPreconditionError("GPT dataset: too few tokens");
  const int64_t epochs = gpt_num_epochs(tokens, seq_len, num_samples);
  const int64_t docs = seq_end - seq_begin;
  const int64_t total = (epochs * tokens - 1) / seq_len;
  auto bad = [](const std::string& what) { return absl::DataLossError(what); };
  const NpyArray& d = ix.doc_idx;
  const NpyArray& s = ix.sample_idx;
  const NpyArray& q = ix.shuffle_idx;

  // doc_idx: every sequence of the range exactly E times.
  if (!has_dims(d, 1) || d.size() != epochs * docs) {
    return bad(absl::StrFormat("doc_idx has %d entries, expected %d epochs x %d sequences",
                               d.size(), epochs, docs));
  }
  std::vector<int64_t> seen(static_cast<size_t>(docs), 0);
  for (int64_t i = 0; i < d.size(); ++i) {
    const int64_t v = d[i];
    if (v < seq_begin || v >= seq_end) {
      return bad(absl::StrFormat("doc_idx[%d] = %d is outside the split's sequences [%d, %d)", i, v,
                                 seq_begin, seq_end));
    }
    ++seen[v - seq_begin];
  }
  for (int64_t k = 0; k < docs; ++k) {
    if (seen[k] != epochs) {
      return bad(absl::StrFormat("doc_idx holds sequence %d %d times, expected %d", seq_begin + k,
                                 seen[k], epochs));
    }
  }
  // sample_idx: rows walk forward and each pair of rows spans exactly S+1 tokens.
  if (!has_dims(s, 2) || s.shape()[0] != total + 1 || s.shape()[1] != 2) {
    return bad(absl::StrFormat("sample_idx has shape [%d, %d], expected [%d, 2]",
                               s.shape().empty() ? -1 : s.shape()[0],
                               s.shape().size() < 2 ? -1 : s.shape()[1], total + 1));
  }
  if (s[0] != 0 || s[1] != 0) return bad("sample_idx[0] is not (0, 0)");
  for (int64_t k = 0; k < total; ++k) {
    const int64_t f = s[2 * k], of = s[2 * k + 1], l = s[2 * k + 2], ol = s[2 * k + 3];
    if (l < f || l >= d.size() || of < 0 || ol < 0 || ol >= sizes[d[l]] || (f == l && ol < of)) {
      return bad(absl::StrFormat("sample_idx rows %d..%d (%d, %d)..(%d, %d) are not an index", k,
                                 k + 1, f, of, l, ol));
    }
    int64_t span = ol - of + 1;
    for (int64_t p = f; p < l; ++p) span += sizes[d[p]];
    if (span != seq_len + 1) {
      return bad(absl::StrFormat("sample %d spans %d tokens, expected seq_len + 1 = %d", k, span,
                                 seq_len + 1));
    }
  }
  // shuffle_idx: a permutation of [0, M).
  if (!has_dims(q, 1) || q.size() != total) {
    return bad(absl::StrFormat("shuffle_idx has %d entries, expected %d", q.size(), total));
  }
  std::vector<bool> hit(static_cast<size_t>(total), false);
  for (int64_t i = 0; i < total; ++i) {
    const int64_t v = q[i];
    if (v < 0 || v >= total || hit[v]) {
      return bad(
          absl::StrFormat("shuffle_idx[%d] = %d: not a permutation of [0, %d)", i, v, total));
    }
    hit[v] = true;
  }
  return absl::OkStatus();
}

std::string gpt_index_file_prefix(const std::string& data_prefix, const GptDatasetOptions& opt) {
  std::string prefix =
      absl::StrCat(index_cache_base(data_prefix, opt.cache_dir), "_", opt.name, "_indexmap_",
                   opt.num_samples, "ns_", opt.seq_len, "sl_", opt.seed, "s");
  // Megatron's names hold no cutoff: only another cutoff than the fork's is named.
  if (opt.last_epoch_cutoff != kDefaultLastEpochCutoff) {
    absl::StrAppend(&prefix, "_", absl::StrFormat("%g", opt.last_epoch_cutoff), "lec");
  }
  return prefix;
}

std::string token_ids_cache_path(const std::string& data_prefix, const std::string& cache_dir) {
  return absl::StrCat(index_cache_base(data_prefix, cache_dir), "_token_ids.txt");
}

absl::StatusOr<std::unique_ptr<GptDataset>> GptDataset::create(
    std::shared_ptr<const IndexedDataset> data, const std::string& data_prefix, int64_t seq_begin,
    int64_t seq_end, const GptDatasetOptions& opt) {
  if (data == nullptr) return absl::InvalidArgumentError("GptDataset: null dataset");
  const std::vector<int32_t>& sizes = data->sizes();
  ANVIL_RETURN_IF_ERROR(check_range(sizes, seq_begin, seq_end, opt.num_samples, opt.seq_len));
  std::unique_ptr<GptDataset> ds(new GptDataset());
  ds->data_ = std::move(data);
  ds->seq_len_ = opt.seq_len;
  ds->file_prefix_ = gpt_index_file_prefix(data_prefix, opt);
  const std::string doc_path = ds->file_prefix_ + "_doc_idx.npy";
  const std::string sample_path = ds->file_prefix_ + "_sample_idx.npy";
  const std::string shuffle_path = ds->file_prefix_ + "_shuffle_idx.npy";

  if (opt.use_cache) {
    absl::Status why = absl::OkStatus();
    GptIndex loaded;
    auto d = NpyArray::open(doc_path);
    auto s = NpyArray::open(sample_path);
    auto q = NpyArray::open(shuffle_path);
    for (const absl::Status& st : {d.status(), s.status(), q.status()}) {
      if (!st.ok() && why.ok()) why = st;
    }
    if (why.ok()) {
      loaded.doc_idx = std::move(*d);
      loaded.sample_idx = std::move(*s);
      loaded.shuffle_idx = std::move(*q);
      why = validate_gpt_index(loaded, sizes, seq_begin, seq_end, opt.num_samples, opt.seq_len);
    }
    if (why.ok()) {
      loaded.tokens_per_epoch = tokens_in(sizes, seq_begin, seq_end);
      loaded.num_epochs = gpt_num_epochs(loaded.tokens_per_epoch, opt.seq_len, opt.num_samples);
      loaded.separate_last_epoch =
          separate_last_epoch(loaded.tokens_per_epoch, loaded.num_epochs, opt.seq_len,
                              opt.num_samples, opt.last_epoch_cutoff);
      ds->index_ = std::move(loaded);
      ds->loaded_from_cache_ = true;
      engine::log_info(
          opt.log, absl::StrFormat("%s: loaded the cached index %s_*.npy "
                                   "(%d samples, %d epoch(s))",
                                   opt.name, ds->file_prefix_, ds->size(), ds->index_.num_epochs));
      return ds;
    }
    if (!absl::IsNotFound(why) || (d.ok() || s.ok() || q.ok())) {
      engine::log_warning(opt.log,
                          absl::StrCat(opt.name, ": the cached index ", ds->file_prefix_,
                                       "_*.npy is unusable (", why.message(), "); rebuilding it"));
    }
  }

  engine::Timer timer;
  ANVIL_ASSIGN_OR_RETURN(ds->index_, build_gpt_index(sizes, seq_begin, seq_end, opt.num_samples,
                                                     opt.seq_len, opt.seed, opt.last_epoch_cutoff));
  std::string where = "kept in memory";
  if (opt.use_cache) {
    const GptIndex& ix = ds->index_;
    const absl::Status w = write_index_cache(
        {{doc_path, &ix.doc_idx}, {sample_path, &ix.sample_idx}, {shuffle_path, &ix.shuffle_idx}},
        opt.cache_dir, opt.name, opt.log);
    if (w.ok()) {
      where = absl::StrCat("cached as ", ds->file_prefix_, "_*.npy");
      // Serve from the page cache (mmap) rather than the heap; identical by construction.
      auto d = NpyArray::open(doc_path);
      auto s = NpyArray::open(sample_path);
      auto q = NpyArray::open(shuffle_path);
      if (d.ok() && s.ok() && q.ok()) {
        ds->index_.doc_idx = std::move(*d);
        ds->index_.sample_idx = std::move(*s);
        ds->index_.shuffle_idx = std::move(*q);
      }
    } else {
      engine::log_warning(opt.log, absl::StrCat(opt.name, ": cannot write the index cache (",
                                                w.message(), "); using the in-memory index"));
    }
  }
  engine::log_info(opt.log,
                   absl::StrFormat("%s: built the index of sequences [%d, %d) (%d tokens, %d "
                                   "epoch(s)%s, %d samples for %d requested) in %.2fs, %s",
                                   opt.name, seq_begin, seq_end, ds->index_.tokens_per_epoch,
                                   ds->index_.num_epochs,
                                   ds->index_.separate_last_epoch ? ", last one separate" : "",
                                   ds->size(), opt.num_samples, timer.seconds(), where));
  return ds;
}

absl::Status GptDataset::sample(int64_t i, int32_t* out) const {
  ANVIL_CHECK_MSG(i >= 0 && i < size(),
                  absl::StrFormat("GptDataset::sample: index %d outside [0, %d)", i, size()));
  const NpyArray& d = index_.doc_idx;
  const NpyArray& s = index_.sample_idx;
  const std::vector<int32_t>& sizes = data_->sizes();
  const int64_t j = index_.shuffle_idx[i];
  // From (doc_idx position f, offset of) to (l, ol) inclusive.
  const int64_t f = s[2 * j], of = s[2 * j + 1], l = s[2 * j + 2], ol = s[2 * j + 3];
  int64_t n = 0;
  auto take = [&](int64_t seq, int64_t offset, int64_t count) {
    ANVIL_CHECK_MSG(n + count <= seq_len_ + 1,
                    absl::StrFormat("GptDataset::sample %d: more than %d tokens", i, seq_len_ + 1));
    const absl::Status st = data_->read(seq, offset, count, out + n);
    n += count;
    return st;
  };
  if (f == l) {
    ANVIL_RETURN_IF_ERROR(take(d[f], of, ol - of + 1));
  } else {
    ANVIL_RETURN_IF_ERROR(take(d[f], of, sizes[d[f]] - of));
    for (int64_t p = f + 1; p < l; ++p) ANVIL_RETURN_IF_ERROR(take(d[p], 0, sizes[d[p]]));
    ANVIL_RETURN_IF_ERROR(take(d[l], 0, ol + 1));
  }
  ANVIL_CHECK_MSG(
      n == seq_len_ + 1,
      absl::StrFormat("GptDataset::sample %d: %d tokens, expected %d", i, n, seq_len_ + 1));
  return absl::OkStatus();
}

}  // namespace anvil::io
