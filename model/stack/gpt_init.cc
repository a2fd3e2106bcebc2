// GPT-2 initialization (see gpt_init.h): per parameter, the ops::init_normal arguments (kind,
// sigma, Philox offset, TP split), then one call per target piece.
#include "model/stack/gpt_init.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "model/stack/gpt_layout.h"

namespace anvil::model::gpt_detail {

ops::TpSplit tp_split(const Param& p, int tp, int tp_rank) {
  ops::TpSplit s;
  ANVIL_CHECK_MSG(!p.shape.empty() && p.shape.size() <= 2,
                  absl::StrCat("GPT init: parameter ", p.name, " must have 1 or 2 dims"));
  s.rows = p.shape[0];
  s.cols = p.shape.size() == 2 ? p.shape[1] : 1;
  if (p.tp_split_dim < 0 || tp == 1) return s;
  ANVIL_CHECK_MSG(p.tp_split_dim < static_cast<int>(p.shape.size()),
                  absl::StrCat("GPT init: parameter ", p.name, " split along a missing dim"));
  s.split_dim = p.tp_split_dim;
  s.parts = p.tp_parts;
  s.tp = tp;
  s.tp_rank = tp_rank;
  return s;
}

void init_range(const InitTarget& t, const Param& p, int64_t first, int64_t count,
                ops::InitNormalArgs args, engine::Stream& stream) {
  const int64_t begin = p.offset + first, end = begin + count;
  // The parameter's elements from flat position lo on fill `dst`.
  auto put = [&](engine::TensorView dst, int64_t lo) {
    args.first = lo - p.offset;
    ops::init_normal(args, dst, stream);
  };
  if (t.part == nullptr) {
    put(flat_slice(t.buf, begin, {count}), begin);
    return;
  }
  for (size_t b = 0; b < t.part->buckets().size(); ++b) {
    const parallel::ZeroPiece piece = t.part->piece(b);
    const int64_t lo = std::max(begin, piece.begin), hi = std::min(end, piece.end);
    if (hi <= lo) continue;
    put(flat_slice(t.buf, piece.shard_offset + lo - piece.begin, {hi - lo}), lo);
  }
}

void init_params(const GptConfig& cfg, const GptShard& shard, const ParamTable& table,
                 const std::vector<InitTarget>& targets, uint64_t seed, engine::Stream& stream) {
  const double resid_std = cfg.init_std / std::sqrt(2.0 * static_cast<double>(cfg.n_layers));
  // Random numbers are numbered by the whole model's flat layout, so a shard draws exactly the
  // values the single-rank model has at the same global element.
  const ParamTable whole = make_param_table(cfg);
  for (const Param& p : table.all()) {
    const Param* global = whole.find(p.name);
    ANVIL_CHECK_MSG(global != nullptr, "GPT init: no parameter " + p.name + " in the whole model");
    const std::string& name = p.name;
    ops::InitNormalArgs args;
    args.tp = tp_split(p, shard.tp, shard.tp_rank);
    if (absl::EndsWith(name, ".bias")) {
      args.kind = ops::InitKind::kConstant;
      args.value = 0.0f;
    } else if (absl::StartsWith(name, "ln_f.") || absl::EndsWith(name, "ln_1.weight") ||
               absl::EndsWith(name, "ln_2.weight") || name == "wte_ln.weight" ||
               name == "lm_head.layernorm.weight") {
      args.kind = ops::InitKind::kConstant;
      args.value = 1.0f;
    } else {
      args.kind = ops::InitKind::kNormal;
      args.sigma = absl::EndsWith(name, "c_proj.weight") ? resid_std : cfg.init_std;
      args.seed = seed;
      args.offset = static_cast<uint64_t>(global->offset);
      // Padded vocabulary rows stay 0 (no token uses them, the loss ignores their logits),
      // unless the loss spans them: then they are parameters, drawn as Megatron draws them.
      args.valid = p.vocab_rows ? cfg.loss_vocab() * cfg.d_model : global->numel();
    }
    for (const InitTarget& t : targets) init_range(t, p, 0, p.numel(), args, stream);
  }
}

}  // namespace anvil::model::gpt_detail
