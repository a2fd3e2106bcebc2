// bin/train's data for the T5 sample layout (model::SampleLayout::kT5Spans; included by
// bin/train.cc only): Megatron's T5 span-corruption samples (io/t5_dataset.h) over the [data]
// split of one sentence-split corpus (bin/preprocess --split-sentences with a WordPiece tokenizer
// and --vocab-extra-ids), written as T5 records (model/t5/t5_train_model.h) for the shared
// model::Trainer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bin/data_error.h"
#include "bin/data_streams.h"
#include "engine/log.h"
#include "engine/status.h"
#include "io/data_split.h"
#include "io/indexed_dataset.h"
#include "io/masked_lm.h"
#include "io/t5_dataset.h"
#include "io/tokenizer.h"
#include "model/t5/t5_train_model.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"

namespace anvil::bin {

// Sample i (wrapping around the dataset) of `ds` as a T5 record: labels where loss_mask is 0
// become -1; the encoder length is the padding mask's count of ones.
inline model::SampleFn t5_samples(std::shared_ptr<const io::T5Dataset> ds, int64_t enc_len,
                                  int64_t dec_len) {
  return [ds, enc_len, dec_len](int64_t i, int32_t* out) {
    io::T5Sample s;
    bin::stop_unless_ok(ds->sample(i % ds->size(), &s), absl::StrCat("T5 sample ", i));
    int32_t length = 0;
    for (int64_t t = 0; t < enc_len; ++t) {
      out[t] = s.enc_tokens[static_cast<size_t>(t)];
      length += s.enc_padding_mask[static_cast<size_t>(t)] != 0;
    }
    for (int64_t t = 0; t < dec_len; ++t) {
      const size_t k = static_cast<size_t>(t);
      out[enc_len + t] = s.dec_tokens[k];
      out[enc_len + dec_len + t] = s.loss_mask[k] != 0 ? s.labels[k] : -1;
    }
    out[enc_len + 2 * dec_len] = length;
  };
}

// The T5 samples of cfg (type t5) into `out`: train, and "val" from the valid split when
// [train] eval_iters > 0 (a warning and no evaluation when the split is too small).
inline absl::Status open_t5_data(const model::TrainConfig& cfg, const engine::LogContext& ctx,
                                 DataStreams* out) {
  const int64_t Te = cfg.data.seq_len, Td = cfg.data.decoder_seq_len;
  if (cfg.data.sources.size() != 1 || cfg.data.weighted || !cfg.data.train_groups.empty()) {
    return absl::InvalidArgumentError(
        "[data] paths: type t5 reads one sentence-split corpus (no blends or groups yet)");
  }
  const std::string& prefix = cfg.data.sources[0].prefix;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<io::IndexedDataset> opened,
                         io::IndexedDataset::open(prefix));
  std::shared_ptr<const io::IndexedDataset> data(std::move(opened));
  const model::TokenizerConfig& t = cfg.tokenizer;
  ANVIL_ASSIGN_OR_RETURN(
      std::unique_ptr<io::Tokenizer> tok,
      io::make_tokenizer({t.type, t.vocab_file, t.merge_file, t.vocab_extra_ids}));
  ANVIL_ASSIGN_OR_RETURN(io::MlmVocab vocab, io::make_mlm_vocab(*tok));
  ANVIL_ASSIGN_OR_RETURN(auto splits, io::split_documents(cfg.data.split, data->num_documents()));
  io::T5DatasetOptions opt;
  opt.max_seq_length = static_cast<int32_t>(Te);
  opt.max_seq_length_dec = static_cast<int32_t>(Td);
  opt.seed = static_cast<int32_t>(cfg.data.seed);
  opt.cache.cache_dir = cfg.data.cache_dir;
  opt.cache.log = ctx;
  opt.num_samples = cfg.train.steps * cfg.train.global_batch;
  ANVIL_ASSIGN_OR_RETURN(
      std::unique_ptr<io::T5Dataset> train,
      io::T5Dataset::create(data, prefix, splits[0].first, splits[0].second, vocab, opt));
  std::shared_ptr<const io::T5Dataset> train_ds(std::move(train));
  model::SampleFn valid_fn;
  if (cfg.train.eval_iters > 0 && splits[1].second > splits[1].first) {
    opt.cache.name = "valid";
    opt.num_samples = cfg.train.eval_iters * cfg.train.global_batch *
                      (cfg.train.steps / std::max<int64_t>(cfg.train.eval_interval, 1) + 2);
    auto valid = io::T5Dataset::create(data, prefix, splits[1].first, splits[1].second, vocab, opt);
    if (valid.ok()) {
      valid_fn = t5_samples(std::shared_ptr<const io::T5Dataset>(std::move(*valid)), Te, Td);
    } else {
      engine::log_warning(ctx, absl::StrCat("no evaluation: ", valid.status().message()));
    }
  }
  engine::log_info(
      ctx, absl::StrFormat("data: %s: %d documents; train documents [%d, %d): %d "
                           "samples%s",
                           prefix, data->num_documents(), splits[0].first, splits[0].second,
                           train_ds->size(), valid_fn ? ", validation from the valid split" : ""));
  out->train = t5_samples(train_ds, Te, Td);
  if (valid_fn) out->valid.push_back({"val", std::move(valid_fn)});
  return absl::OkStatus();
}

}  // namespace anvil::bin
