// The registry hooks GPT and BERT share (model/train/family.h): both are GptModel
// (model/stack/gpt.h) trained as GptTrainModel (model/stack_train/gpt_train_model.h); their
// families (model/gpt/gpt_family.cc, model/bert/bert_family.cc) add their sample records, [data]
// and [eval] rules, the stack features they switch on and their checkpoint-record keys.
#include "model/stack_train/stack_family.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "model/stack/gpt_layout.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/arch_record.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "parallel/parallel_config.h"

namespace anvil::model {
namespace {

using Record = std::map<std::string, std::string>;

// "124.44M", "1.31B" (bin/train's count).
std::string count_text(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fB", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fK", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

// Names as the [model] schema spells them (gpt_arch_config.cc).
const char* name_of(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearned:
      return "learned";
    case PositionEmbedding::kAlibi:
      return "alibi";
    case PositionEmbedding::kRotary:
      return "rotary";
    case PositionEmbedding::kNone:
      return "none";
  }
  return "?";
}

const char* name_of(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kSwiglu:
      return "swiglu";
    case Activation::kGeglu:
      return "geglu";
    case Activation::kReglu:
      return "reglu";
    case Activation::kLiglu:
      return "liglu";
    case Activation::kGeluErf:
      return "gelu_erf";
  }
  return "?";
}

// The checkpoint record's architecture keys (arch_record.h), GPT's and BERT's alike.
void add_gpt(const GptConfig& m, Record& r) {
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"vocab_size", m.vocab_size},
                               {"max_seq_len", m.max_seq_len},
                               {"d_model", m.d_model},
                               {"n_heads", m.n_heads},
                               {"n_layers", m.n_layers},
                               {"ffn_hidden", m.ffn()}}) {
    r[key] = absl::StrCat(v);
  }
  // Only for grouped-query attention: records of multi-head models written before the key
  // existed stay equal.
  if (m.grouped_query()) r["n_kv_heads"] = absl::StrCat(m.kv_heads());
  r["ln_eps"] = record_text(m.ln_eps);
  r["hidden_dropout"] = record_text(m.hidden_dropout);
  r["attention_dropout"] = record_text(m.attention_dropout);
  r["position_embedding"] = name_of(m.position_embedding);
  if (m.position_embedding == PositionEmbedding::kRotary) {
    r["rotary_base"] = record_text(m.rotary_base);
    r["rotary_percent"] = record_text(m.rotary_percent);
    // Only when scaled: records of unscaled rotary models stay equal.
    const ops::RotaryScaling& rs = m.rope_scaling;
    if (rs.type != ops::RotaryScalingType::kNone) {
      r["rope_scaling"] = rs.type == ops::RotaryScalingType::kLinear ? "linear" : "llama3";
      r["rope_scaling_factor"] = record_text(rs.factor);
    }
    if (rs.type == ops::RotaryScalingType::kLlama3) {
      r["rope_low_freq_factor"] = record_text(rs.low_freq_factor);
      r["rope_high_freq_factor"] = record_text(rs.high_freq_factor);
      r["rope_original_max_position"] = absl::StrCat(rs.original_max_position);
    }
  }
  if (m.sliding_window > 0) r["sliding_window"] = absl::StrCat(m.sliding_window);
  r["embed_layernorm"] = record_bool(m.embed_layernorm);
  r["activation"] = name_of(m.activation);
  r["norm"] = m.layernorm() ? "layernorm" : "rmsnorm";
  r["norm_placement"] = m.post_ln() ? "post" : "pre";
  r["bias"] = record_bool(m.bias);
  if (m.qkv_bias && !m.bias) r["qkv_bias"] = "true";  // absent: as before the key existed
  r["tie_embeddings"] = record_bool(m.tie_embeddings);
  add_vocab_padding_record(m.vocab_padding_in_loss, m.padded(), r);
}

}  // namespace

std::string record_bool(bool v) { return v ? "true" : "false"; }

absl::Status parse_stack_layers(const engine::Config& c, const TrainConfig& t) {
  if (c.get_int("parallel", "pp_split_rank") != 0) {
    return c.error("parallel", "pp_split_rank", "is for [model] type = t5 only");
  }
  const parallel::ParallelConfig& pc = t.parallel;
  const int64_t chunks = static_cast<int64_t>(pc.pp) * pc.virtual_stages;
  absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
      parallel::partition_layers(t.model.n_layers, chunks, pc.pipeline_partition);
  if (!parts.ok()) {
    return c.error("parallel", "pp",
                   absl::StrFormat("pp %d * virtual_stages %d with [model] n_layers %d: %s", pc.pp,
                                   pc.virtual_stages, t.model.n_layers, parts.status().message()));
  }
  return absl::OkStatus();
}

Family stack_family(std::string type, std::string title) {
  Family f;
  f.type = std::move(type);
  f.title = title;
  f.summary = [title](const TrainConfig& cfg) {
    const GptConfig& m = cfg.model;
    const int64_t T = cfg.data.seq_len;
    return absl::StrFormat(
        "model: %s %d layers, d_model %d, %d heads, ffn %d, vocab %d (padded %d), seq_len %d: %s "
        "parameters (%s in matmuls), %s FLOP per token (fwd+bwd)",
        title, m.n_layers, m.d_model, m.n_heads, m.ffn(), m.vocab_size, m.padded(), T,
        count_text(static_cast<double>(m.total_params())),
        count_text(static_cast<double>(m.matmul_params())), count_text(flops_per_token(m, T)));
  };
  f.activation_slots = [](const TrainConfig& cfg, const ModelPlace& at) -> absl::StatusOr<int64_t> {
    ANVIL_ASSIGN_OR_RETURN(GptShard shard,
                           GptTrainModel::shard_for(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return shard.act_slots;
  };
  f.plan = [](const TrainConfig& cfg, const Precision& prec,
              const ModelPlace& at) -> absl::StatusOr<engine::MemoryPlan> {
    ANVIL_ASSIGN_OR_RETURN(GptShard shard,
                           GptTrainModel::shard_for(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return GptTrainModel::plan(cfg, prec, shard);
  };
  f.offload_bytes = [](const TrainConfig& cfg, const Precision& prec,
                       const ModelPlace& at) -> absl::StatusOr<size_t> {
    if (!cfg.parallel.offload_optimizer) return size_t{0};
    ANVIL_ASSIGN_OR_RETURN(GptShard shard,
                           GptTrainModel::shard_for(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return GptModel::offload_host_bytes(cfg.model, {cfg.train.micro_batch, cfg.data.seq_len}, prec,
                                        shard);
  };
  f.create = [](const TrainConfig& cfg, const Precision& prec,
                const ModelPlace& at) -> absl::StatusOr<std::unique_ptr<Model>> {
    ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<GptTrainModel> m, GptTrainModel::create(cfg, prec, at));
    return std::unique_ptr<Model>(std::move(m));
  };
  f.uses_embedding_group = true;
  f.model_record = [](const TrainConfig& cfg, Record& r) { add_gpt(cfg.model, r); };
  f.tensor_shapes = [](const TrainConfig& cfg) {
    std::map<std::string, std::vector<int64_t>> out;
    const ParamTable table = gpt_detail::make_param_table(cfg.model);
    for (const Param& p : table.all()) out[p.name] = logical_shape(p, cfg.model, 1);
    return out;
  };
  f.layers = [](const TrainConfig& cfg) {
    return absl::StrCat(cfg.model.n_layers, cfg.model.n_layers == 1 ? " layer" : " layers");
  };
  f.layout_record = [](const TrainConfig&, std::map<std::string, int64_t>&) {};
  return f;
}

}  // namespace anvil::model
