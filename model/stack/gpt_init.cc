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
