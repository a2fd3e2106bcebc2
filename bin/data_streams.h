// bin/train's sample streams (header only: bin/*.cc are the programs): the training stream and
// the held-out sets as model::SampleFn over io/'s datasets, which DataStreams owns (the streams
// read them for as long as the trainer runs). open_gpt_data fills it with Megatron's GPT
// datasets (blends, named groups, a separate validation set); open_bert_data with BERT's
// (io/bert_corpus.h: one prefix or a weighted blend, a separate validation set) over the
// sentence-split [data] paths, each sample written as model/train/sample_record.h's BERT record.
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
#include "bin/data_error.h"
#include "engine/log.h"
#include "engine/status.h"
#include "io/bert_corpus.h"
#include "io/blended_dataset.h"
#include "io/gpt_dataset.h"
#include "io/masked_lm.h"
#include "io/tokenizer.h"
#include "model/train/sample_record.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"

namespace anvil::bin {

struct DataStreams {
  model::SampleFn train;
  std::vector<model::HeldOutSet> valid, test;
  // Owners (GPT or BERT).
  std::optional<io::GptCorpus> gpt_corpus;
  std::unique_ptr<io::GptSamples> gpt_train;
  std::vector<std::pair<std::string, std::unique_ptr<io::GptSamples>>> gpt_valid, gpt_test;
  std::vector<io::BertCorpus> bert;  // the [data] paths; then valid_paths, if any
};

// Sample i past the end of the `size` samples of split `what`: one warning when wrapping around
// (*warned), else the run stops (exit status 1) naming the split.
inline void past_the_end(const std::string& what, int64_t size, int64_t i, bool wrap,
                         const engine::LogContext& ctx, bool* warned) {
  if (!wrap) {
    stop_unless_ok(absl::OutOfRangeError(absl::StrFormat(
                       "the %s split's %d samples are used up (sample %d asked for)%s", what, size,
                       i, what == "train" ? "" : "; [data] valid_exhausted = wrap starts it over")),
                   "data");
  }
  if (*warned) return;
  *warned = true;
  engine::log_warning(ctx, absl::StrFormat("the %s split's %d samples are used up (sample %d "
                                           "asked for): wrapping around",
                                           what, size, i));
}

// Samples of a validation or test split. Past its end (a resumed run with more evaluations than
// the split was sized for) Megatron-DeepSpeed's iterator raises StopIteration; here the stream
// wraps around with one warning, or with `wrap` false ([data] valid_exhausted = error) the run
// stops with the set's name.
inline model::SampleFn held_out_samples(const io::GptSamples& s, const std::string& what, bool wrap,
                                        const engine::LogContext& ctx) {
  auto warned = std::make_shared<bool>(false);
  return [&s, what, wrap, ctx, warned](int64_t i, int32_t* out) {
    if (i >= s.size()) past_the_end(what, s.size(), i, wrap, ctx, warned.get());
    stop_unless_ok(s.sample(i % s.size(), out), absl::StrCat("the ", what, " split, sample ", i));
  };
}

// The corpus of `sources` with [data] split `split`, its token ids checked against the
// vocabulary (ids outside it would fail, CHECK, only when their sample is reached).
inline absl::StatusOr<io::GptCorpus> open_corpus(const std::vector<model::DataSource>& sources,
                                                 bool weighted, const std::string& split,
                                                 const model::TrainConfig& cfg) {
  std::vector<io::GptDataSource> io_sources;
  for (const model::DataSource& d : sources) io_sources.push_back({d.weight, d.prefix});
  ANVIL_ASSIGN_OR_RETURN(io::GptCorpus c, io::GptCorpus::open(io_sources, weighted, split));
  ANVIL_RETURN_IF_ERROR(c.check_token_ids(cfg.model.vocab_size, cfg.data.cache_dir));
  return c;
}

// A named dataset group (--{train,valid,test}-weighted-split-paths) with n samples: one
// dataset, or a blend by weight (Megatron's build_dataset_group), under the group's name.
inline absl::StatusOr<std::unique_ptr<io::GptSamples>> build_group(const model::DataGroup& g,
                                                                   int64_t n,
                                                                   io::GptDatasetOptions opt,
                                                                   const model::TrainConfig& cfg) {
  std::vector<model::DataSource> sources;
  for (size_t k = 0; k < g.prefixes.size(); ++k) sources.push_back({g.weights[k], g.prefixes[k]});
  ANVIL_ASSIGN_OR_RETURN(io::GptCorpus c, open_corpus(sources, sources.size() > 1, "1", cfg));
  opt.name = g.name;
  return c.build_fraction_ranges(g.ranges, n, opt);
}

// "124.44M", "1.31B".
inline std::string count(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fB", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fK", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

// Megatron's GPT datasets over the split (io/gpt_dataset, io/blended_dataset), with Megatron's
// sample counts `want` (train, valid, test); the index caches are built here by every process
// that lacks them.
inline absl::Status open_gpt_data(const model::TrainConfig& cfg, const std::array<int64_t, 3>& want,
                                  const engine::LogContext& ctx, DataStreams* out) {
  const int64_t T = cfg.data.seq_len;
  if (cfg.data.sources.empty() && cfg.data.train_groups.empty()) {
    return model::check_data_files("");
  }
  for (const auto* list : {&cfg.data.sources, &cfg.data.valid_sources}) {
    for (const model::DataSource& d : *list) {
      if (absl::Status s = model::check_data_files(d.prefix); !s.ok()) return s;
    }
  }
  for (const auto* groups :
       {&cfg.data.train_groups, &cfg.data.valid_groups, &cfg.data.test_groups}) {
    for (const model::DataGroup& g : *groups) {
      for (const std::string& p : g.prefixes) {
        if (absl::Status s = model::check_data_files(p); !s.ok()) return s;
      }
    }
  }
  io::GptDatasetOptions iopt;
  iopt.seq_len = T;
  iopt.seed = static_cast<uint32_t>(cfg.data.seed);
  iopt.cache_dir = cfg.data.cache_dir;
  iopt.last_epoch_cutoff = cfg.data.last_epoch_cutoff;
  iopt.log = ctx;
  // Mode 1 ([data] paths and split): one corpus split three ways.
  std::optional<io::GptCorpus>& corpus = out->gpt_corpus;
  if (!cfg.data.sources.empty()) {
    auto c = open_corpus(cfg.data.sources, cfg.data.weighted, cfg.data.split, cfg);
    if (!c.ok()) return c.status();
    corpus = std::move(*c);
    for (size_t k = 0; k < corpus->num_sources(); ++k) {
      const io::IndexedDataset& d = corpus->data(k);
      const auto [tb, te] = corpus->range(k, 0);
      const auto [vb, ve] = corpus->range(k, 1);
      engine::log_info(
          ctx, absl::StrFormat("data: %s%s: %d documents, %d sequences, %s tokens; train "
                               "sequences [%d, %d), validation [%d, %d)",
                               cfg.data.weighted
                                   ? absl::StrFormat("weight %g ", corpus->source(k).weight)
                                   : std::string(),
                               corpus->source(k).prefix, d.num_documents(), d.num_sequences(),
                               count(static_cast<double>(d.total_tokens())), tb, te, vb, ve));
    }
  }
  absl::StatusOr<std::unique_ptr<io::GptSamples>> train_samples =
      cfg.data.train_groups.empty() ? corpus->build_split(0, want[0], iopt)
                                    : build_group(cfg.data.train_groups[0], want[0], iopt, cfg);
  if (!train_samples.ok()) return train_samples.status();
  // Held-out sets: named groups, or valid_paths, or the validation and test splits.
  std::vector<std::pair<std::string, std::unique_ptr<io::GptSamples>>> valid_sets, test_sets;
  for (const auto& [groups, n, sets] : {std::tuple{&cfg.data.valid_groups, want[1], &valid_sets},
                                        std::tuple{&cfg.data.test_groups, want[2], &test_sets}}) {
    if (cfg.train.eval_iters == 0) break;
    for (const model::DataGroup& g : *groups) {
      auto v = build_group(g, n, iopt, cfg);
      if (!v.ok()) return v.status();
      sets->emplace_back(g.name, std::move(*v));
    }
  }
  if (cfg.train.eval_iters > 0 && valid_sets.empty()) {
    if (!cfg.data.valid_sources.empty()) {
      // A separate validation set: every sequence of valid_paths.
      auto vc = open_corpus(cfg.data.valid_sources, cfg.data.valid_weighted, "1", cfg);
      if (!vc.ok()) return vc.status();
      io::GptDatasetOptions vopt = iopt;
      vopt.name = "valid";
      auto v = vc->build_whole(want[1], vopt);
      if (!v.ok()) return v.status();
      valid_sets.emplace_back("val", std::move(*v));
    } else if (corpus) {
      auto v = corpus->build_split(1, want[1], iopt);
      if (v.ok()) {
        valid_sets.emplace_back("val", std::move(*v));
      } else {
        engine::log_warning(ctx, absl::StrCat("no evaluation: ", v.status().message()));
      }
    }
  }
  // The test split, evaluated once at the end (Megatron's "lm loss" of the test data).
  if (cfg.train.eval_iters > 0 && test_sets.empty() && corpus) {
    auto t = corpus->build_split(2, want[2], iopt);
    if (t.ok()) {
      test_sets.emplace_back("test", std::move(*t));
    } else {
      engine::log_info(ctx, absl::StrCat("no test evaluation: ", t.status().message()));
    }
  }
  const io::GptSamples& ts = **train_samples;
  std::string train_desc = absl::StrFormat(
      "train: %d samples (Megatron's train_samples or steps x global_batch)", want[0]);
  if (ts.blend_index() == nullptr) {
    absl::StrAppend(
        &train_desc,
        absl::StrFormat(", %d epoch(s) of %d samples", ts.datasets()[0]->index().num_epochs,
                        (ts.datasets()[0]->index().tokens_per_epoch - 1) / T));
  } else {
    absl::StrAppend(&train_desc, ", blended from");
    for (const auto& d : ts.datasets()) {
      absl::StrAppend(&train_desc, absl::StrFormat(" %d", d->size()));
    }
  }
  auto names = [](const auto& sets) {
    std::string out;
    for (const auto& [name, samples] : sets) absl::StrAppend(&out, out.empty() ? "" : ", ", name);
    return out.empty() ? std::string("none") : out;
  };
  engine::log_info(
      ctx,
      absl::StrFormat("data: %s; validation (%s): %d samples each, %d per evaluation; "
                      "test (%s): %d samples each, evaluated at the end",
                      train_desc, names(valid_sets), want[1],
                      cfg.train.eval_iters * cfg.train.global_batch, names(test_sets), want[2]));

  out->train = [&ts](int64_t i, int32_t* rec) {
    stop_unless_ok(ts.sample(i, rec), absl::StrCat("the training split, sample ", i));
  };
  for (const auto& [name, samples] : valid_sets) {
    out->valid.push_back({name, held_out_samples(*samples, name, cfg.data.wrap_held_out, ctx)});
  }
  for (const auto& [name, samples] : test_sets) {
    out->test.push_back({name, held_out_samples(*samples, name, cfg.data.wrap_held_out, ctx)});
  }
  out->gpt_train = std::move(*train_samples);
  out->gpt_valid = std::move(valid_sets);
  out->gpt_test = std::move(test_sets);
  return absl::OkStatus();
}

// Writes BERT sample i % size of `ds` as a record of seq_len T (model/train/sample_record.h); a
// held-out set wraps around (one warning) or stops the run (wrap false), the training set must
// not run out (Megatron sizes it for the run): it stops the run.
inline model::SampleFn bert_stream(const io::BertSamples& ds, int64_t T, const std::string& what,
                                   bool wrap, const engine::LogContext& ctx) {
  auto warned = std::make_shared<bool>(false);
  return [&ds, T, what, wrap, ctx, warned](int64_t i, int32_t* out) {
    if (i >= ds.size()) past_the_end(what, ds.size(), i, wrap, ctx, warned.get());
    io::BertSample s;
    stop_unless_ok(ds.sample(i % ds.size(), &s), absl::StrCat("the ", what, " split, sample ", i));
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

// One log line per BERT source: its documents per split and the samples its datasets hold.
inline void log_bert_sources(const io::BertCorpus& c, const std::string& what,
                             const engine::LogContext& ctx) {
  for (size_t k = 0; k < c.sources.size(); ++k) {
    const io::BertSplits& b = c.splits[k];
    std::string line = absl::StrFormat("data (BERT, [data] %s): %s", what, c.sources[k].prefix);
    if (c.weighted) {
      absl::StrAppend(&line, absl::StrFormat(" (weight %g)", c.sources[k].weight));
    }
    static constexpr const char* kNames[] = {"train", "validation", "test"};
    for (size_t s = 0; s < 3; ++s) {
      absl::StrAppend(&line,
                      absl::StrFormat("%s %s documents [%d, %d) %d samples", s == 0 ? ":" : ",",
                                      kNames[s], b.documents[s].first, b.documents[s].second,
                                      b.sets[s] ? b.sets[s]->size() : 0));
    }
    engine::log_info(ctx, line);
  }
}

// BERT's datasets of the [data] paths (one prefix, or weighted prefixes blended), split by
// [data] split, sized `want` (train, valid, test), with the [tokenizer]'s WordPiece vocabulary
// (its [CLS] [SEP] [MASK] [PAD]); with valid_paths the validation set is every document of
// those prefixes instead (as GPT's). Weighted split paths (named groups) are GPT-only.
inline absl::Status open_bert_data(const model::TrainConfig& cfg,
                                   const std::array<int64_t, 3>& want,
                                   const engine::LogContext& ctx, DataStreams* out) {
  const model::DataConfig& d = cfg.data;
  if (d.sources.empty() || !d.train_groups.empty() || !d.valid_groups.empty() ||
      !d.test_groups.empty()) {
    return absl::InvalidArgumentError(
        "type bert: set [data] paths to sentence-split prefixes (bin/preprocess "
        "--split-sentences), one or weighted; weighted split paths are GPT-only here");
  }
  for (const auto* list : {&d.sources, &d.valid_sources}) {
    for (const model::DataSource& s : *list) {
      ANVIL_RETURN_IF_ERROR(model::check_data_files(s.prefix));
    }
  }
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
  const bool separate_valid = !d.valid_sources.empty();
  auto sources = [](const std::vector<model::DataSource>& list) {
    std::vector<io::GptDataSource> out;
    for (const model::DataSource& s : list) out.push_back({s.weight, s.prefix});
    return out;
  };
  ANVIL_ASSIGN_OR_RETURN(io::BertCorpus corpus,
                         io::open_bert_corpus(sources(d.sources), d.weighted, d.split,
                                              {n[0], separate_valid ? 0 : n[1], n[2]}, vocab, opt));
  out->bert.push_back(std::move(corpus));
  log_bert_sources(out->bert.back(), "paths", ctx);
  if (separate_valid && n[1] > 0) {
    // Every document of valid_paths: the "validation" split of "0,1,0".
    ANVIL_ASSIGN_OR_RETURN(io::BertCorpus valid,
                           io::open_bert_corpus(sources(d.valid_sources), d.valid_weighted, "0,1,0",
                                                {0, n[1], 0}, vocab, opt));
    out->bert.push_back(std::move(valid));
    log_bert_sources(out->bert.back(), "valid_paths", ctx);
  }
  const io::BertCorpus& c = out->bert.front();
  if (!c.sets[0]) {
    return absl::InvalidArgumentError(
        absl::StrFormat("type bert: [data] split %s leaves no training documents of %s", d.split,
                        c.sources[0].prefix));
  }
  const int64_t T = d.seq_len;
  const io::BertSamples* valid = out->bert.back().sets[1].get();
  out->train = bert_stream(*c.sets[0], T, "train", /*wrap=*/false, ctx);
  if (valid) {
    out->valid.push_back({"val", bert_stream(*valid, T, "val", cfg.data.wrap_held_out, ctx)});
  }
  if (c.sets[2]) {
    out->test.push_back({"test", bert_stream(*c.sets[2], T, "test", cfg.data.wrap_held_out, ctx)});
  }
  engine::log_info(
      ctx, absl::StrFormat("data (BERT, %s head): train %d samples%s, validation %d, test %d",
                           cfg.model.binary_head ? "sentence-order" : "no binary",
                           c.sets[0]->size(), c.sets[0]->blend_index() ? " (blended)" : "",
                           valid ? valid->size() : 0, c.sets[2] ? c.sets[2]->size() : 0));
  return absl::OkStatus();
}

}  // namespace anvil::bin
