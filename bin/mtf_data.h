// bin/train's packed T0/MTF sample streams ([data] mtf; header only: bin/*.cc are the programs):
// the pair PREFIX_inputs_document / PREFIX_targets_document of [data] paths, split by [data]
// split over its pairs, each split packed as the fork's DecoderPackedMTFDataset packs it
// (io/mtf_dataset.h) and written as model/train/mtf_batch.h's record.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bin/data_error.h"
#include "bin/data_streams.h"
#include "engine/log.h"
#include "engine/status.h"
#include "io/data_split.h"
#include "io/mtf_dataset.h"
#include "model/train/mtf_batch.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"

namespace anvil::bin {

// Writes row i of `s` (split `what`) as an MTF record of seq_len T; past the end a held-out
// set wraps (one warning) or stops the run (wrap false), the training split stops the run.
inline model::SampleFn mtf_stream(std::shared_ptr<const io::MtfSamples> s, int64_t T,
                                  const std::string& what, bool wrap,
                                  const engine::LogContext& ctx) {
  auto warned = std::make_shared<bool>(false);
  return [s, T, what, wrap, ctx, warned](int64_t i, int32_t* out) {
    if (i >= s->size()) past_the_end(what, s->size(), i, wrap, ctx, warned.get());
    io::MtfRow row;
    stop_unless_ok(s->sample(i % s->size(), &row),
                   absl::StrCat("the ", what, " split, sample ", i));
    const model::MtfRecord r = model::mtf_record(out, T);
    for (int64_t t = 0; t <= T; ++t) {
      r.tokens[t] = row.tokens[static_cast<size_t>(t)];
      r.segment_ids[t] = row.segment_ids[static_cast<size_t>(t)];
      r.is_inputs[t] = row.is_inputs[static_cast<size_t>(t)];
    }
  };
}

// The MTF splits of the [data] paths prefix, sized `want` (train, valid, test rows; held-out
// ones only with evaluation), indexes built in memory with [data] seed.
inline absl::Status open_mtf_data(const model::TrainConfig& cfg, const std::array<int64_t, 3>& want,
                                  const engine::LogContext& ctx, DataStreams* out) {
  const model::DataConfig& d = cfg.data;
  const std::string& prefix = d.sources.at(0).prefix;  // (mtf_config.h: exactly one)
  for (const char* key : {"_inputs_document", "_targets_document"}) {
    ANVIL_RETURN_IF_ERROR(model::check_data_files(prefix + key));
  }
  ANVIL_ASSIGN_OR_RETURN(std::shared_ptr<const io::MtfPairs> pairs, io::open_mtf_pairs(prefix));
  for (const auto* ds : {pairs->inputs.get(), pairs->targets.get()}) {
    ANVIL_RETURN_IF_ERROR(ds->check_token_ids(cfg.model.vocab_size));
  }
  ANVIL_ASSIGN_OR_RETURN(auto ranges, io::split_documents(d.split, pairs->size()));
  static constexpr const char* kNames[] = {"train", "val", "test"};
  std::array<std::shared_ptr<const io::MtfSamples>, 3> sets;
  std::string line =
      absl::StrFormat("data (MTF): %s: %d input/target pairs", prefix, pairs->size());
  for (size_t k = 0; k < 3; ++k) {
    const auto [begin, end] = ranges[k];
    absl::StrAppend(&line,
                    absl::StrFormat("%s %s [%d, %d)", k == 0 ? ";" : ",", kNames[k], begin, end));
    if (end <= begin || (k > 0 && cfg.train.eval_iters == 0)) continue;
    ANVIL_ASSIGN_OR_RETURN(
        std::unique_ptr<io::MtfSamples> s,
        io::MtfSamples::build(pairs, begin, end - begin, want[k], d.seq_len + 1,
                              static_cast<uint32_t>(d.seed), static_cast<int32_t>(d.pad_token)));
    absl::StrAppend(
        &line,
        absl::StrFormat(" %d packed rows of %d tokens in %d epoch(s)", s->size(), d.seq_len + 1,
                        static_cast<int64_t>(s->index().shuffle.size()) / s->documents()));
    sets[k] = std::move(s);
  }
  engine::log_info(ctx, line);
  if (!sets[0]) {
    return absl::InvalidArgumentError(
        absl::StrFormat("[data] mtf: split %s leaves no training pairs of %s", d.split, prefix));
  }
  const int64_t T = d.seq_len;
  out->train = mtf_stream(sets[0], T, "train", /*wrap=*/false, ctx);
  if (sets[1]) out->valid.push_back({"val", mtf_stream(sets[1], T, "val", d.wrap_held_out, ctx)});
  if (sets[2]) {
    out->test.push_back({"test", mtf_stream(sets[2], T, "test", d.wrap_held_out, ctx)});
  }
  return absl::OkStatus();
}

}  // namespace anvil::bin
