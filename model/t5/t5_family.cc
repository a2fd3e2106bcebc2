// The T5 entry of the model-family registry (model/train/family.h): T5Model (model/t5/t5.h)
// trained as T5TrainModel (model/t5/t5_train_model.h) on span-corruption records, its [model]
// keys (model/t5/t5_train_config.h), its checkpoint record and tensors, and the pipeline split
// (pp_split_rank) its checkpoints keep.
#include "model/t5/t5_family.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "model/t5/t5_impl.h"
#include "model/t5/t5_train_config.h"
#include "model/t5/t5_train_model.h"
#include "model/train/arch_record.h"
#include "model/train/checkpoint.h"

namespace anvil::model {

Family t5_family() {
  Family f;
  f.type = "t5";
  f.title = "T5";
  f.doc =
      "the encoder-decoder (pretrain_t5.py; HF T5ForConditionalGeneration numerics, "
      "docs/models.md): n_layers encoder and decoder_layers decoder layers, d_model, n_heads, "
      "d_kv, ffn_hidden (d_ff), hidden_dropout (HF dropout_rate), ln_eps (1e-6), t5_version; "
      "span-corruption samples from sentence-split data with a WordPiece [tokenizer] and "
      "vocab_extra_ids sentinels; tensor, pipeline ([parallel] pp_split_rank) and data "
      "parallelism, ZeRO stages 1-3, checkpoints and bin/convert.";
  f.samples = SampleLayout::kT5Spans;
  f.record_width = [](const TrainConfig& cfg) {
    return t5_record_width(cfg.data.seq_len, cfg.data.decoder_seq_len);
  };
  f.parse = [](const engine::Config& c, TrainConfig& t) -> absl::Status {
    if (t.curriculum.enabled) {
      return c.error("curriculum", "enabled",
                     "sequence-length curriculum truncates causal (GPT-family) samples; [model] "
                     "type bert and t5 do not support it");
    }
    return parse_t5_model(c, t);
  };
  f.schema = add_t5_schema;
  f.summary = [](const TrainConfig& cfg) {
    const T5Config& m = t5_config(cfg);
    return absl::StrFormat(
        "model: T5 v%s, %d encoder + %d decoder layers, d_model %d, %d heads of %d, d_ff %d, "
        "vocab %d (padded %d), encoder %d / decoder %d tokens: %d parameters in matmuls",
        m.gated() ? "1.1" : "1.0", m.n_encoder_layers, m.n_decoder_layers, m.d_model, m.n_heads,
        m.d_kv, m.d_ff, m.vocab_size, m.padded(), cfg.data.seq_len, cfg.data.decoder_seq_len,
        m.matmul_params());
  };
  f.activation_slots = [](const TrainConfig& cfg, const ModelPlace& at) -> absl::StatusOr<int64_t> {
    ANVIL_ASSIGN_OR_RETURN(T5Shard shard,
                           T5TrainModel::stage_shard(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return shard.act_slots;
  };
  f.plan = [](const TrainConfig& cfg, const Precision& prec,
              const ModelPlace& at) -> absl::StatusOr<engine::MemoryPlan> {
    ANVIL_ASSIGN_OR_RETURN(T5Shard shard,
                           T5TrainModel::stage_shard(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return T5TrainModel::plan(cfg, prec, shard);
  };
  f.offload_bytes = [](const TrainConfig& cfg, const Precision& prec,
                       const ModelPlace& at) -> absl::StatusOr<size_t> {
    if (!cfg.parallel.offload_optimizer) return size_t{0};
    ANVIL_ASSIGN_OR_RETURN(T5Shard shard,
                           T5TrainModel::stage_shard(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return T5Model::offload_host_bytes(
        t5_config(cfg), {cfg.train.micro_batch, cfg.data.seq_len, cfg.data.decoder_seq_len}, prec,
        shard);
  };
  f.create = [](const TrainConfig& cfg, const Precision& prec,
                const ModelPlace& at) -> absl::StatusOr<std::unique_ptr<Model>> {
    ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<T5TrainModel> m, T5TrainModel::create(cfg, prec, at));
    return std::unique_ptr<Model>(std::move(m));
  };
  // The shared embedding and relative tables are summed over the pipeline (sum_shared_grads).
  f.uses_embedding_group = false;
  f.encoder_decoder = true;
  f.model_record = [](const TrainConfig& cfg, std::map<std::string, std::string>& r) {
    const T5Config& t = t5_config(cfg);
    r["t5_version"] = t.gated() ? "1.1" : "1.0";
    for (const auto& [key, v] : {std::pair<const char*, int64_t>{"vocab_size", t.vocab_size},
                                 {"d_model", t.d_model},
                                 {"d_kv", t.d_kv},
                                 {"n_heads", t.n_heads},
                                 {"ffn_hidden", t.d_ff},
                                 {"n_layers", t.n_encoder_layers},
                                 {"decoder_layers", t.n_decoder_layers},
                                 {"relative_buckets", t.num_buckets},
                                 {"relative_max_distance", t.max_distance}}) {
      r[key] = absl::StrCat(v);
    }
    r["ln_eps"] = record_text(t.eps);
    r["hidden_dropout"] = record_text(t.dropout);
    add_vocab_padding_record(t.vocab_padding_in_loss, t.padded(), r);
  };
  f.tensor_shapes = [](const TrainConfig& cfg) {
    const T5Config& t = t5_config(cfg);
    std::map<std::string, std::vector<int64_t>> out;
    const ParamTable table = t5_detail::make_t5_param_table(t);
    for (const Param& p : table.all()) out[p.name] = logical_shape(p, t.loss_vocab(), 1);
    return out;
  };
  f.layers = [](const TrainConfig& cfg) {
    const T5Config& t = t5_config(cfg);
    return absl::StrCat(t.n_encoder_layers, " encoder and ", t.n_decoder_layers, " decoder layers");
  };
  f.layout_record = [](const TrainConfig& cfg, std::map<std::string, int64_t>& out) {
    if (cfg.parallel.pp > 1) out["pp_split_rank"] = cfg.parallel.pp_split_rank;
  };
  return f;
}

}  // namespace anvil::model
