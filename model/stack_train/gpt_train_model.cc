// GPT and BERT as the trainer's Model (see gpt_train_model.h): their shard, plan, host
// micro-batches and step hooks, moved out of the trainer unchanged.
#include "model/stack_train/gpt_train_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "model/train/checkpoint.h"
#include "model/train/family.h"
#include "model/train/mtf_batch.h"
#include "model/train/prefix_lm.h"
#include "model/train/sample_record.h"
#include "model/train/trainer.h"
#include "parallel/comm.h"
#include "parallel/parallel_config.h"
#include "parallel/pipeline_schedule.h"

namespace anvil::model {

namespace {

// The family's samples are BERT sentence pairs (model/train/sample_record.h): token types,
// lengths and binary labels besides the tokens and targets.
bool bert_pairs(const TrainConfig& cfg) {
  return family_of(cfg).samples == SampleLayout::kBertPair;
}

}  // namespace

absl::StatusOr<GptShard> GptTrainModel::shard_for(const TrainConfig& cfg, int tp_rank, int pp_rank,
                                                  int dp_rank) {
  const parallel::ParallelConfig& pc = cfg.parallel;
  GptShard sh;
  sh.tp = pc.tp;
  sh.tp_rank = tp_rank;
  const int64_t v = pc.virtual_stages, chunks = static_cast<int64_t>(pc.pp) * v;
  ANVIL_ASSIGN_OR_RETURN(
      std::vector<std::vector<int64_t>> parts,
      parallel::partition_layers(cfg.model.n_layers, chunks, pc.pipeline_partition));
  sh.chunks.clear();
  for (int64_t c = 0; c < v; ++c)
    sh.chunks.push_back(parts[static_cast<size_t>(c * pc.pp + pp_rank)]);
  sh.sequence_parallel = pc.sequence_parallel;
  sh.pre = pp_rank == 0;
  sh.post = pp_rank == pc.pp - 1;
  ANVIL_ASSIGN_OR_RETURN(
      parallel::PipelinePlan plan,
      parallel::plan_pipeline(pc.pp, pp_rank, static_cast<int>(v),
                              static_cast<int>(cfg.train.accumulation_steps(pc.dp))));
  sh.act_slots = pipeline_slots(plan, pc.pp, pp_rank);
  sh.recompute = recompute_from_name(pc.recompute);
  // ZeRO shards over the DP group whenever there is one (dp > 1, or reduce_single_rank).
  if (pc.zero_stage > 0 && (pc.dp > 1 || pc.reduce_single_rank)) {
    sh.zero_stage = pc.zero_stage;
    sh.zero_dp = pc.dp;
    sh.zero_rank = dp_rank;
  }
  sh.offload_optimizer = pc.offload_optimizer;
  sh.offload_threads = pc.offload_threads;
  ANVIL_RETURN_IF_ERROR(sh.validate(cfg.model));  // tp_comm is the caller's
  return sh;
}

absl::StatusOr<engine::MemoryPlan> GptTrainModel::plan(const TrainConfig& cfg,
                                                       const Precision& prec,
                                                       const GptShard& shard) {
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len;
  ANVIL_ASSIGN_OR_RETURN(engine::MemoryPlan plan,
                         GptModel::plan(cfg.model, GptRunShape{B, T}, prec, shard));
  if (prec.device == engine::Device::kCpu && shard.offload_optimizer) {
    // The offloaded optimizer state shares the host with everything else on the CPU.
    ANVIL_ASSIGN_OR_RETURN(size_t bytes,
                           GptModel::offload_host_bytes(cfg.model, GptRunShape{B, T}, prec, shard));
    plan.add("offload (host)", "offloaded master, adamw m / v, staging", bytes);
  }
  if (prec.device == engine::Device::kCpu) {
    // create()'s four (BERT, prefix-LM, MTF: five) i32 arrays of [accumulation steps * B*T]
    // (<= global_batch * T tokens, bounded by the config's validation), and the loss weights.
    const int64_t accum = std::max<int64_t>(cfg.train.accumulation_steps(cfg.parallel.dp), 1);
    const size_t arrays = bert_pairs(cfg) || cfg.data.prefix_lm || cfg.data.mtf ? 5 : 4;
    const size_t weights = cfg.data.reweight_loss ? static_cast<size_t>(B * T) * sizeof(float) : 0;
    plan.add("batch", "host micro-batches",
             engine::saturating_mul(arrays * sizeof(int32_t), static_cast<size_t>(accum * B * T)) +
                 weights);
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<GptTrainModel>> GptTrainModel::create(const TrainConfig& cfg,
                                                                     const Precision& prec,
                                                                     const ModelPlace& at) {
  const parallel::ParallelConfig& pc = cfg.parallel;
  ANVIL_ASSIGN_OR_RETURN(GptShard shard, shard_for(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
  shard.tp_comm = at.tp;
  // The model reduces its gradients over DP (parallel/grad_sync.h): plain DP's bucketed
  // all-reduce, or ZeRO's reduce-scatters.
  shard.dp_comm = at.dp;
  shard.dp_bucket_elems = pc.bucket_mb > 0 ? pc.bucket_elems() : 0;
  std::unique_ptr<GptTrainModel> t(new GptTrainModel());
  t->cfg_ = cfg.model;
  t->data_ = cfg.data;
  t->embedding_comm_ = at.embedding;
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len;
  t->B_ = B;
  t->T_ = T;
  ANVIL_ASSIGN_OR_RETURN(
      t->model_, GptModel::create(cfg.model, GptRunShape{B, T}, prec, cfg.train.seed, shard));
  GptTrainModel* self = t.get();
  t->stage_ = std::make_unique<GptPipelineStage>(*t->model_,
                                                 [self](int64_t m) { return self->host_batch(m); });
  const int64_t accum = cfg.train.accumulation_steps(pc.dp);
  const size_t n = static_cast<size_t>(std::max<int64_t>(accum, 1) * B * T);
  t->tokens_.assign(n, 0);
  t->targets_.assign(n, 0);
  t->segments_.assign(n, 0);
  t->positions_.resize(n);
  for (size_t i = 0; i < n; ++i) t->positions_[i] = static_cast<int32_t>(i % T);
  t->sample_.assign(static_cast<size_t>(family_of(cfg).record_width(cfg)), 0);
  if (cfg.data.prefix_lm || cfg.data.mtf) t->prefix_end_.assign(n, 0);
  if (cfg.data.reweight_loss) {
    t->loss_weights_.resize(static_cast<size_t>(B * T));
    for (int64_t i = 0; i < B * T; ++i) {
      t->loss_weights_[static_cast<size_t>(i)] = position_frequency_weight(i % T, T);
    }
    t->weight_sums_.assign(static_cast<size_t>(std::max<int64_t>(accum, 1)), 0.0);
  }
  t->pairs_ = bert_pairs(cfg);
  if (t->pairs_) {
    t->types_.assign(n, 0);
    t->lengths_.assign(n / static_cast<size_t>(T), 0);
    t->binary_.assign(n / static_cast<size_t>(T), 0);
  }
  return t;
}

double GptTrainModel::flops_per_token() const { return model::flops_per_token(cfg_, T_); }

int64_t GptTrainModel::load_micro_batch(const SampleFn& fn, int64_t first_index, int64_t m) {
  const int64_t B = B_, T = T_;
  const int64_t vocab = cfg_.vocab_size;
  const DataConfig& d = data_;
  int64_t counted = 0;
  if (pairs_) {
    for (int64_t b = 0; b < B; ++b) {
      fn(first_index + b, sample_.data());
      const int64_t row = (m * B + b) * T;
      counted += decode_bert_record(cfg_, first_index + b, T, sample_.data(), tokens_.data() + row,
                                    types_.data() + row, targets_.data() + row,
                                    lengths_.data() + m * B, binary_.data() + m * B, b);
    }
    return counted;
  }
  if (d.mtf) {  // packed T0/MTF rows (model/train/mtf_batch.h)
    const MtfBatchOptions o{vocab, static_cast<int32_t>(d.pad_token),
                            static_cast<int32_t>(d.eod_token), d.eod_mask_loss,
                            d.reset_position_ids};
    for (int64_t b = 0; b < B; ++b) {
      fn(first_index + b, sample_.data());
      const int64_t row = (m * B + b) * T;
      counted += decode_mtf_record(o, first_index + b, T, sample_.data(), tokens_.data() + row,
                                   targets_.data() + row, positions_.data() + row,
                                   segments_.data() + row, prefix_end_.data() + row);
    }
    return counted;
  }
  for (int64_t b = 0; b < B; ++b) {
    fn(first_index + b, sample_.data());
    for (int64_t t = 0; t <= T; ++t) {
      // An id outside the vocabulary would index past the embedding: a data/config mismatch.
      ANVIL_CHECK_MSG(sample_[t] >= 0 && sample_[t] < vocab,
                      absl::StrFormat("sample %d holds token id %d, outside [model] vocab_size %d",
                                      first_index + b, sample_[t], vocab));
    }
    const int64_t row = (m * B + b) * T;
    int32_t* tokens = tokens_.data() + row;
    int32_t* targets = targets_.data() + row;
    std::copy(sample_.begin(), sample_.begin() + T, tokens);
    std::copy(sample_.begin() + 1, sample_.end(), targets);
    // Megatron's get_ltor_masks_and_position_ids: the loss mask is 0 where the *input* token is
    // eod, positions restart at 0 on the token after an eod, and with reset_attention_mask a
    // token sees only its own document (segment = eods before it).
    if (d.eod_mask_loss) {
      for (int64_t t = 0; t < T; ++t) {
        if (tokens[t] == d.eod_token) targets[t] = -1;
      }
    }
    if (d.reset_position_ids) {
      int32_t* pos = positions_.data() + row;
      int32_t p = 0;
      for (int64_t t = 0; t < T; ++t) {
        pos[t] = p;
        p = tokens[t] == d.eod_token ? 0 : p + 1;
      }
    }
    if (d.reset_attention_mask) {
      int32_t* seg = segments_.data() + row;
      int32_t docs = 0;
      for (int64_t t = 0; t < T; ++t) {
        seg[t] = docs;
        docs += tokens[t] == d.eod_token;
      }
    }
    // Prefix-LM (pretrain_prefix_lm.py): the sample's random prefix, bidirectional in the
    // attention; with loss_on_targets_only no loss on the prefix (model/train/prefix_lm.h).
    if (d.prefix_lm) {
      const PrefixLmOptions o{static_cast<int32_t>(d.eod_token), d.reset_attention_mask,
                              d.loss_on_targets_only, d.seed};
      apply_prefix_lm(o, first_index + b, tokens, T, prefix_end_.data() + row, targets);
    }
    // The curriculum's truncation: positions and attention are causal, so outputs before
    // counted_tokens_ do not see the tokens after it; their targets are left out of the loss.
    if (counted_tokens_ > 0) std::fill(targets + counted_tokens_, targets + T, -1);
    for (int64_t t = 0; t < T; ++t) counted += targets[t] >= 0;
  }
  if (!loss_weights_.empty()) {  // the fork's loss_mask.sum() after reweight_loss_mask_
    double sum = 0.0;
    const int32_t* targets = targets_.data() + m * B * T;
    for (int64_t i = 0; i < B * T; ++i) {
      if (targets[i] >= 0) sum += loss_weights_[static_cast<size_t>(i)];
    }
    weight_sums_[static_cast<size_t>(m)] = sum;
  }
  return counted;
}

double GptTrainModel::loss_normalizer(int64_t m, int64_t counted) const {
  const DataConfig& d = data_;
  if (!d.prefix_lm) return static_cast<double>(counted);
  if (d.prefix_lm_normalizer == DataConfig::PrefixLmNormalizer::kMaskSum) {
    return d.reweight_loss ? weight_sums_[static_cast<size_t>(m)] : static_cast<double>(counted);
  }
  // GPTModelPipe's CrossEntropy: micro_batch x average_tokens_per_sample, where with targets
  // only the weights' mean cumulative sum, mean_k sum_{j <= k} 2 j / (T + 1) = (T + 2) / 3 (the
  // fork sums in f32; equal to rounding), and without weights (T + 1) / 2.
  const double T = static_cast<double>(T_);
  const double per_sample = !d.loss_on_targets_only ? T
                            : d.reweight_loss       ? (T + 2.0) / 3.0
                                                    : (T + 1.0) / 2.0;
  return static_cast<double>(B_) * per_sample;
}

GptBatch GptTrainModel::host_batch(int64_t m) const {
  const size_t row = static_cast<size_t>(m * B_ * T_);
  GptBatch b{tokens_.data() + row, positions_.data() + row, targets_.data() + row,
             data_.reset_attention_mask || data_.mtf ? segments_.data() + row : nullptr};
  if (data_.prefix_lm || data_.mtf) b.prefix_end = prefix_end_.data() + row;
  if (!loss_weights_.empty()) b.loss_weights = loss_weights_.data();
  if (pairs_) {
    const size_t first = static_cast<size_t>(m * B_);
    b.token_types = types_.data() + row;
    b.lengths = lengths_.data() + first;
    b.binary_labels = binary_.data() + first;
  }
  return b;
}

void GptTrainModel::sum_shared_grads(engine::Stream& s) {
  // The tied embedding: the first stage's input copy and the last stage's LM-head copy get
  // the sum of both gradients (equal to the single-stage gradient of the one matrix).
  if (embedding_comm_ == nullptr) return;
  for (const Param& p : model_->params().all()) {
    if (p.tied) embedding_comm_->all_reduce(p.grad, parallel::ReduceOp::kSum, s);
  }
}

void GptTrainModel::optimizer_step(const OptimizerStep& o, engine::Stream& s) {
  model_->optimizer_step(o, s);
}

std::vector<engine::HostSlice> GptTrainModel::checkpoint_slices(int dp_rank, engine::Stream& s) {
  return gpt_checkpoint_slices(*model_, dp_rank, s);
}

absl::Status GptTrainModel::load_checkpoint(const TensorLookup& lookup, bool weights_only,
                                            engine::Stream& s) {
  return gpt_load_checkpoint(*model_, lookup, weights_only, s);
}

GptModel& gpt_model(Model& model) {
  auto* m = dynamic_cast<GptTrainModel*>(&model);
  ANVIL_CHECK_MSG(m != nullptr, "gpt_model: the trainer's model is not GPT or BERT");
  return m->gpt();
}

}  // namespace anvil::model
