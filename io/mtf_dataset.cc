// The input/target pair of a prefix and its packed rows (see mtf_dataset.h).
#include "io/mtf_dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::io {

absl::StatusOr<std::shared_ptr<const MtfPairs>> open_mtf_pairs(const std::string& prefix) {
  auto p = std::make_shared<MtfPairs>();
  p->prefix = prefix;
  const std::string in = prefix + "_inputs_document", out = prefix + "_targets_document";
  ANVIL_ASSIGN_OR_RETURN(p->inputs, IndexedDataset::open(in));
  ANVIL_ASSIGN_OR_RETURN(p->targets, IndexedDataset::open(out));
  const int64_t n = p->inputs->num_sequences();
  if (n != p->targets->num_sequences() || n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MTF data ", prefix, ": ", in, " holds ", n, " sequences and ", out, " ",
        p->targets->num_sequences(),
        "; need the same number (>= 1), pair i being inputs i and targets i (bin/preprocess "
        "--json-keys inputs targets skips an empty text in its own dataset only: drop such "
        "lines first)"));
  }
  for (const auto* d : {p->inputs.get(), p->targets.get()}) {
    for (int64_t i = 0; i < n; ++i) {
      if (d->sizes()[static_cast<size_t>(i)] < 1) {
        return absl::InvalidArgumentError(absl::StrCat("MTF data ", prefix, ": sequence ", i,
                                                       " of ", d == p->inputs.get() ? in : out,
                                                       " is empty (the fork asserts >= 1 token)"));
      }
    }
  }
  return std::shared_ptr<const MtfPairs>(std::move(p));
}

absl::StatusOr<std::unique_ptr<MtfSamples>> MtfSamples::build(std::shared_ptr<const MtfPairs> pairs,
                                                              int64_t first, int64_t count,
                                                              int64_t num_samples,
                                                              int64_t seq_length, uint32_t seed,
                                                              int32_t pad_token) {
  if (first < 0 || count < 1 || first + count > pairs->size()) {
    return absl::InvalidArgumentError(absl::StrCat("MTF data ", pairs->prefix, ": documents [",
                                                   first, ", ", first + count, ") are not within ",
                                                   pairs->size()));
  }
  std::vector<int64_t> in_sizes(static_cast<size_t>(count)), out_sizes(in_sizes.size());
  for (int64_t k = 0; k < count; ++k) {
    in_sizes[static_cast<size_t>(k)] = pairs->inputs->sizes()[static_cast<size_t>(first + k)];
    out_sizes[static_cast<size_t>(k)] = pairs->targets->sizes()[static_cast<size_t>(first + k)];
  }
  std::unique_ptr<MtfSamples> s(new MtfSamples());
  absl::StatusOr<MtfPackedIndex> idx =
      build_mtf_packed_index(in_sizes, out_sizes, num_samples, seq_length, seed);
  if (!idx.ok()) {
    return absl::Status(idx.status().code(),
                        absl::StrCat("MTF data ", pairs->prefix, ": ", idx.status().message()));
  }
  s->index_ = *std::move(idx);
  s->pairs_ = std::move(pairs);
  s->first_ = first;
  s->count_ = count;
  s->seq_length_ = seq_length;
  s->pad_ = pad_token;
  return s;
}

absl::Status MtfSamples::sample(int64_t i, MtfRow* row) const {
  if (i < 0 || i >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat("MTF data ", pairs_->prefix, ": sample ", i, " of ", size()));
  }
  const auto [start, end] = index_.samples[static_cast<size_t>(i)];
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> items;
  for (int64_t k = start; k < end; ++k) {
    const int64_t doc = first_ + index_.shuffle[static_cast<size_t>(k)];
    auto& [in, out] = items.emplace_back();
    in.resize(static_cast<size_t>(pairs_->inputs->sizes()[static_cast<size_t>(doc)]));
    out.resize(static_cast<size_t>(pairs_->targets->sizes()[static_cast<size_t>(doc)]));
    ANVIL_RETURN_IF_ERROR(pairs_->inputs->read(doc, 0, static_cast<int64_t>(in.size()), in.data()));
    ANVIL_RETURN_IF_ERROR(
        pairs_->targets->read(doc, 0, static_cast<int64_t>(out.size()), out.data()));
  }
  ANVIL_ASSIGN_OR_RETURN(*row, pack_mtf_row(items, seq_length_, pad_));
  return absl::OkStatus();
}

}  // namespace anvil::io
