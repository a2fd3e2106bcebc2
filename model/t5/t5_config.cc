// T5Config validation and size arithmetic, and HF's relative-position bucket (model/t5/t5.h).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "model/t5/t5.h"
#include "parallel/parallel_config.h"

namespace anvil::model {

absl::Status T5Config::validate() const {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("T5 config: ", parts...));
  };
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"vocab_size", vocab_size},
                               {"vocab_multiple", vocab_multiple},
                               {"d_model", d_model},
                               {"d_kv", d_kv},
                               {"n_heads", n_heads},
                               {"d_ff", d_ff},
                               {"n_encoder_layers", n_encoder_layers},
                               {"n_decoder_layers", n_decoder_layers},
                               {"num_buckets", num_buckets},
                               {"max_distance", max_distance}}) {
    // Bounds first (engine/checked_math.h), so no size product below or in planning wraps.
    if (v < 1 || v > engine::kMaxDimension) {
      return bad(key, " must be in [1, 2^31 - 1], got ", v);
    }
  }
  if (n_encoder_layers > parallel::kMaxLayers || n_decoder_layers > parallel::kMaxLayers) {
    return bad("n_encoder_layers ", n_encoder_layers, " and n_decoder_layers ", n_decoder_layers,
               " must not exceed ", parallel::kMaxLayers);
  }
  // HF halves the buckets for the bidirectional encoder and then uses half of those as exact
  // distances: 4 is the least that leaves an exact and a log-spaced bucket on each side.
  if (num_buckets < 4 || num_buckets % 2 != 0) {
    return bad("num_buckets must be even and >= 4, got ", num_buckets);
  }
  if (max_distance <= num_buckets / 4) {
    return bad("max_distance (", max_distance, ") must exceed num_buckets / 4 (", num_buckets / 4,
               "), the largest exact distance of the encoder");
  }
  if (!(dropout >= 0.0f && dropout < 1.0f)) return bad("dropout must be in [0, 1), got ", dropout);
  if (!(eps > 0.0f)) return bad("eps must be > 0, got ", eps);
  if (!(init_factor > 0.0f)) return bad("init_factor must be > 0, got ", init_factor);
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"inner (n_heads * d_kv)", inner()},
                                {"the padded vocabulary", padded()},
                                {"wi's outputs", wi_out()}}) {
    if (n > engine::kMaxDimension) return bad(what, " ", n, " exceeds 2^31 - 1");
  }
  if (!engine::product_within({padded(), d_model}, engine::kMaxElements) ||
      !engine::product_within({3 * inner(), d_model}, engine::kMaxElements) ||
      !engine::product_within({wi_out(), d_model}, engine::kMaxElements)) {
    return bad("a weight matrix exceeds 2^44 elements");
  }
  return absl::OkStatus();
}

int64_t T5Config::matmul_params() const {
  const int64_t d = d_model, i = inner();
  const int64_t enc = 4 * d * i + wi_out() * d + d * d_ff;
  const int64_t dec = enc + 4 * d * i;  // + cross-attention q, k, v, o
  return n_encoder_layers * enc + n_decoder_layers * dec + padded() * d;
}

absl::Status T5Shard::validate(const T5Config& cfg) const {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("T5 shard: ", parts...));
  };
  if (tp < 1 || tp_rank < 0 || tp_rank >= tp) return bad("tp rank ", tp_rank, " of ", tp);
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"[model] n_heads", cfg.n_heads},
                                {"[model] ffn_hidden (d_ff)", cfg.d_ff},
                                {"[model] padded_vocab", cfg.padded()}}) {
    if (absl::Status s = parallel::check_tp_split(what, n, tp); !s.ok()) return bad(s.message());
  }
  if (act_slots < 1) return bad("act_slots ", act_slots, " (need >= 1)");
  if (zero_stage < 0 || zero_stage > 3) return bad("ZeRO stage ", zero_stage, " outside [0, 3]");
  if (offload_optimizer && zero_stage == 3) {
    return bad("optimizer offload is not implemented with ZeRO stage 3 (stages 0, 1, 2)");
  }
  if (zero_dp < 1 || zero_rank < 0 || zero_rank >= zero_dp) {
    return bad("ZeRO rank ", zero_rank, " outside a DP group of ", zero_dp);
  }
  return t5_stage_layers(cfg, pp, pp_split, pp_rank).status();
}

T5StageLayers T5Shard::layers(const T5Config& cfg) const {
  absl::StatusOr<T5StageLayers> l = t5_stage_layers(cfg, pp, pp_split, pp_rank);
  ANVIL_CHECK_MSG(l.ok(), std::string(l.status().message()));
  return *l;
}

absl::StatusOr<T5StageLayers> t5_stage_layers(const T5Config& cfg, int pp, int split, int stage) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("T5 pipeline: ", parts...));
  };
  const int64_t le = cfg.n_encoder_layers, ld = cfg.n_decoder_layers;
  if (pp < 1 || stage < 0 || stage >= pp) return bad("stage ", stage, " of pp ", pp);
  if (pp == 1) return T5StageLayers{0, le, 0, ld};
  if (split < 1 || split >= pp) {
    return bad("split rank ", split, " outside [1, pp - 1 = ", pp - 1,
               "] (stages [0, split) hold the encoder, [split, pp) the decoder)");
  }
  if (le % split != 0 || ld % (pp - split) != 0) {
    return bad(le, " encoder layers over ", split, " stages and ", ld, " decoder layers over ",
               pp - split, " stages do not split evenly");
  }
  T5StageLayers l;
  if (stage < split) {
    const int64_t n = le / split;
    l.enc_begin = stage * n;
    l.enc_end = l.enc_begin + n;
  } else {
    const int64_t n = ld / (pp - split);
    l.dec_begin = (stage - split) * n;
    l.dec_end = l.dec_begin + n;
  }
  return l;
}

int32_t t5_relative_bucket(int64_t n, bool bidirectional, int64_t num_buckets,
                           int64_t max_distance) {
  int64_t bucket = 0;
  int64_t dist = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (n > 0) bucket += num_buckets;
    dist = n < 0 ? -n : n;
  } else {
    dist = n < 0 ? -n : 0;
  }
  const int64_t max_exact = num_buckets / 2;
  if (dist < max_exact) return static_cast<int32_t>(bucket + dist);
  // torch: max_exact + (log(dist.float() / max_exact) / math.log(max_distance / max_exact)
  // * (num_buckets - max_exact)).to(long), in f32 (the Python scalars enter as f32 values).
  const float ratio = static_cast<float>(dist) / static_cast<float>(max_exact);
  const float denom = static_cast<float>(
      std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / denom * static_cast<float>(num_buckets - max_exact);
  int64_t large = max_exact + static_cast<int64_t>(scaled);
  if (large > num_buckets - 1) large = num_buckets - 1;
  return static_cast<int32_t>(bucket + large);
}

}  // namespace anvil::model
