// bin/train's sample streams (header only: bin/*.cc are the programs): the training stream and
// the held-out sets as model::SampleFn over io/'s datasets, which DataStreams owns (the streams
// read them for as long as the trainer runs). open_gpt_data (bin/train.cc) fills it with
// Megatron's GPT datasets; open_bert_data below with BERT's (io/bert_corpus.h) over the
// sentence-split [data] paths, each sample written as model/sample_record.h's BERT record.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/log.h"
#include "engine/status.h"
#include "io/bert_corpus.h"
#include "io/blended_dataset.h"
#include "io/masked_lm.h"
#include "io/tokenizer.h"
#include "model/sample_record.h"
#include "model/train_config.h"
#include "model/trainer.h"

namespace anvil::bin {

struct DataStreams {
  model::SampleFn train;
  std::vector<model::HeldOutSet> valid, test;
  // Owners (GPT or BERT).
  std::optional<io::GptCorpus> gpt_corpus;
  std::unique_ptr<io::GptSamples> gpt_train;
  std::vector<std::pair<std::string, std::unique_ptr<io::GptSamples>>> gpt_valid, gpt_test;
  std::optional<io::BertSplits> bert;
};

// Writes BERT sample i % size of `ds` as a record of seq_len T (model/sample_record.h); a
// held-out set wraps around (one warning), the training set must not (CHECK: Megatron sizes it
// for the run).
inline model::SampleFn bert_stream(const io::BertDataset& ds, int64_t T, const std::string& what,
                                   bool wrap, const engine::LogContext& ctx) {
  auto warned = std::make_shared<bool>(false);
  return [&ds, T, what, wrap, ctx, warned](int64_t i, int32_t* out) {
    ANVIL_CHECK_MSG(wrap || i < ds.size(),
                    absl::StrFormat("the %s split has %d BERT samples, sample %d asked for", what,
                                    ds.size(), i));
    if (i >= ds.size() && !*warned) {
      *warned = true;
      engine::log_warning(ctx, absl::StrFormat("the %s split's %d samples are used up (sample %d "
                                               "asked for): wrapping around",
                                               what, ds.size(), i));
    }
    io::BertSample s;
    ds.sample(i % ds.size(), &s);
    const model::BertRecord r = model::bert_record(out, T);
    for (int64_t t = 0; t < T; ++t) {
      r.tokens[t] = s.tokens[static_cast<size_t>(t)];
      r.types[t] = s.types[static_cast<size_t>(t)];
      r.labels[t] = s.labels[static_cast<size_t>(t)];
      r.loss_mask[t] = s.loss_mask[static_cast<size_t>(t)];
      r.padding_mask[t] = s.padding_mask[static_cast<size_t>(t)];
    }
    *r.is_random = s.is_random;
  };
}

// BERT's datasets of the one [data] paths prefix, split by [data] split, sized `want` (train,
// valid, test), with the [tokenizer]'s WordPiece vocabulary (its [CLS] [SEP] [MASK] [PAD]).
inline absl::Status open_bert_data(const model::TrainConfig& cfg,
                                   const std::array<int64_t, 3>& want,
                                   const engine::LogContext& ctx, DataStreams* out) {
  const model::DataConfig& d = cfg.data;
  if (d.sources.size() != 1 || d.weighted || !d.valid_sources.empty() || !d.train_groups.empty()) {
    return absl::InvalidArgumentError(
        "type bert: [data] paths must be one sentence-split prefix (bin/preprocess "
        "--split-sentences); blends, valid_paths and weighted split paths are GPT-only here");
  }
  ANVIL_RETURN_IF_ERROR(model::check_data_files(d.sources[0].prefix));
  const model::TokenizerConfig& t = cfg.tokenizer;
  if (t.type.empty()) {
    return absl::InvalidArgumentError(
        "type bert: set [tokenizer] type = BertWordPieceLowerCase (or BertWordPieceCase) and "
        "vocab_file: the masking needs the vocabulary's [CLS], [SEP], [MASK], [PAD] and '##' "
        "pieces");
  }
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<io::Tokenizer> tok,
                         io::make_tokenizer({t.type, t.vocab_file, t.merge_file}));
  ANVIL_ASSIGN_OR_RETURN(io::MlmVocab vocab, io::make_mlm_vocab(*tok));
  io::BertDatasetOptions opt;
  opt.max_seq_length = static_cast<int32_t>(d.seq_len);
  opt.masked_lm_prob = d.mask_prob;
  opt.short_seq_prob = d.short_seq_prob;
  opt.seed = static_cast<int32_t>(d.seed);
  opt.binary_head = cfg.model.binary_head;
  opt.cache.cache_dir = d.cache_dir;
  opt.cache.log = ctx;
  std::array<int64_t, 3> n = want;
  if (cfg.train.eval_iters == 0) n[1] = n[2] = 0;
  ANVIL_ASSIGN_OR_RETURN(io::BertSplits splits,
                         io::open_bert_splits(d.sources[0].prefix, d.split, n, vocab, opt));
  out->bert = std::move(splits);
  const io::BertSplits& b = *out->bert;
  if (!b.sets[0]) {
    return absl::InvalidArgumentError(
        absl::StrFormat("type bert: [data] split %s leaves no training documents of %s", d.split,
                        d.sources[0].prefix));
  }
  const int64_t T = d.seq_len;
  out->train = bert_stream(*b.sets[0], T, "train", /*wrap=*/false, ctx);
  if (b.sets[1]) out->valid.push_back({"val", bert_stream(*b.sets[1], T, "val", true, ctx)});
  if (b.sets[2]) out->test.push_back({"test", bert_stream(*b.sets[2], T, "test", true, ctx)});
  engine::log_info(ctx,
                   absl::StrFormat("data (BERT, %s head): %s: documents train [%d, %d) %d samples, "
                                   "validation [%d, %d) %d, test [%d, %d) %d",
                                   cfg.model.binary_head ? "sentence-order" : "no binary",
                                   d.sources[0].prefix, b.documents[0].first, b.documents[0].second,
                                   b.sets[0]->size(), b.documents[1].first, b.documents[1].second,
                                   b.sets[1] ? b.sets[1]->size() : 0, b.documents[2].first,
                                   b.documents[2].second, b.sets[2] ? b.sets[2]->size() : 0));
  return absl::OkStatus();
}

}  // namespace anvil::bin
