// [model] type = t5 configuration (see t5_train_config.h).
#include "model/t5/t5_train_config.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/checked_math.h"
#include "model/train/train_config.h"

namespace anvil::model {

std::unique_ptr<FamilyConfig> T5FamilyConfig::clone() const {
  return std::make_unique<T5FamilyConfig>(*this);
}

T5Config& t5_config(TrainConfig& t) {
  if (auto* part = dynamic_cast<T5FamilyConfig*>(t.family_config.get())) return part->t5;
  auto part = std::make_unique<T5FamilyConfig>();
  T5Config& out = part->t5;
  t.family_config.reset(std::move(part));
  return out;
}

const T5Config& t5_config(const TrainConfig& t) {
  static const T5Config kDefault;
  const auto* part = dynamic_cast<const T5FamilyConfig*>(t.family_config.get());
  return part != nullptr ? part->t5 : kDefault;
}

void add_t5_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("model", "t5_version", ConfigType::kString, "1.0",
        "type t5: 1.0 = ReLU FFN, LM head tied to the shared embedding and fed d_model^-1/2 times "
        "the decoder output (t5-small/base/large); 1.1 = gated tanh-GELU FFN (wi_0, wi_1), "
        "untied lm_head (google/t5-v1_1-*).",
        {"1.0", "1.1"});
  s.add("model", "decoder_layers", ConfigType::kInt, "0",
        "type t5: decoder layers (HF num_decoder_layers); 0 = n_layers (the encoder's).");
  s.add("model", "d_kv", ConfigType::kInt, "0",
        "type t5: width of one attention head (HF d_kv); 0 = d_model / n_heads. On CUDA 64 or 128 "
        "(flash attention).");
  s.add("model", "relative_buckets", ConfigType::kInt, "32",
        "type t5: relative-position buckets of the attention bias (HF "
        "relative_attention_num_buckets).");
  s.add("model", "relative_max_distance", ConfigType::kInt, "128",
        "type t5: the distance from which all relative positions share the last bucket (HF "
        "relative_attention_max_distance).");
}

absl::Status parse_t5_model(const engine::Config& c, TrainConfig& t) {
  const GptConfig& m = t.model;
  const int64_t split = c.get_int("parallel", "pp_split_rank");
  for (const char* key : {"decoder_layers", "d_kv"}) {
    if (c.get_int("model", key) < 0) {
      return c.error("model", key,
                     absl::StrFormat("must be >= 0, got %d", c.get_int("model", key)));
    }
  }
  T5Config& f = t5_config(t);
  f.version = c.get_string("model", "t5_version") == "1.1" ? T5Version::kV1_1 : T5Version::kV1_0;
  f.vocab_size = m.vocab_size;
  f.vocab_multiple = m.vocab_multiple;
  f.vocab_padding_in_loss = m.vocab_padding_in_loss;
  f.d_model = m.d_model;
  f.n_heads = m.n_heads;
  f.d_kv = c.get_int("model", "d_kv") > 0 ? c.get_int("model", "d_kv") : m.d_model / m.n_heads;
  f.d_ff = m.ffn();
  f.n_encoder_layers = m.n_layers;
  f.n_decoder_layers =
      c.get_int("model", "decoder_layers") > 0 ? c.get_int("model", "decoder_layers") : m.n_layers;
  f.num_buckets = c.get_int("model", "relative_buckets");
  f.max_distance = c.get_int("model", "relative_max_distance");
  f.dropout = m.hidden_dropout;
  f.eps = m.ln_eps;
  if (absl::Status s = f.validate(); !s.ok())
    return c.error("model", "type", std::string(s.message()));
  parallel::ParallelConfig& p = t.parallel;
  if (p.virtual_stages != 1) {
    return c.error("parallel", "virtual_stages",
                   "[model] type = t5 runs one model chunk per pipeline stage (1F1B), got " +
                       std::to_string(p.virtual_stages));
  }
  if (p.pp == 1 && split != 0) {
    return c.error("parallel", "pp_split_rank",
                   absl::StrFormat("%d needs pp > 1 (pp is 1)", split));
  }
  if (split < 0 || (p.pp > 1 && split >= p.pp)) {
    return c.error("parallel", "pp_split_rank",
                   absl::StrFormat("%d outside [1, pp - 1 = %d] (0 = pp / 2)", split, p.pp - 1));
  }
  p.pp_split_rank = p.pp > 1 && split == 0 ? p.pp / 2 : static_cast<int>(split);
  for (int stage = 0; stage < p.pp; ++stage) {
    if (absl::Status s = t5_stage_layers(f, p.pp, p.pp_split_rank, stage).status(); !s.ok()) {
      return c.error("parallel", "pp_split_rank", std::string(s.message()));
    }
  }
  if (p.sequence_parallel && p.tp > 1) {
    const T5RunShape shape{t.train.micro_batch, t.data.seq_len, t.data.decoder_seq_len};
    if (absl::Status s = check_t5_row_split(f, shape, p.tp); !s.ok()) {
      return c.error("parallel", "sequence_parallel", std::string(s.message()));
    }
  }
  // [eval]: the context on the encoder, the continuation scored by the decoder
  // (model/tasks/seq2seq_eval.h), whose greedy tokens read one vocabulary slice.
  if (t.eval.any() && p.tp > 1) {
    return c.error(
        "parallel", "tp",
        absl::StrFormat("[eval] tasks of [model] type t5 run with tp = 1, got tp %d", p.tp));
  }
  if (!t.eval.text.empty() && t.eval.text_stride > t.data.decoder_seq_len) {
    return c.error("eval", "text_stride",
                   absl::StrFormat("type t5 predicts each window's new tokens with the decoder: "
                                   "must be <= [data] decoder_seq_len %d, got %d",
                                   t.data.decoder_seq_len, t.eval.text_stride));
  }
  // rampup_batch_size, skip_iterations, fp16 with loss scaling: the shared trainer's
  // (model/train/trainer.h).
  // T5's attention is flash attention, whose CUDA kernels take bf16 or f16.
  if (c.get_string("train", "precision") == "fp32" && c.get_string("train", "device") != "cpu") {
    return c.error("train", "precision",
                   "t5 trains in bf16 or fp16 on CUDA (flash attention); fp32 only with device = "
                   "cpu");
  }
  if (t.tokenizer.type.empty() || t.tokenizer.vocab_extra_ids == 0) {
    return c.error("tokenizer", "vocab_extra_ids",
                   "type t5 needs a [tokenizer] (WordPiece, as Megatron's T5) with the sentinels "
                   "the data was made with (T5: 100)");
  }
  return absl::OkStatus();
}

}  // namespace anvil::model
