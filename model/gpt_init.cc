// GPT-2 initialization on the host (see gpt_init.h).
#include "model/gpt_init.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/memory.h"
#include "engine/philox.h"
#include "engine/status.h"
#include "model/gpt_layout.h"

namespace anvil::model::gpt_detail {

namespace {

// Philox word 2 of the counter tags the init stream, so it never coincides with dropout's
// (seed, offset) stream, whose counters have words 2 and 3 zero.
constexpr uint32_t kInitStreamTag = 0x494e4954u;  // "INIT"

// Converts host f32 values to dst's dtype and copies them in.
void upload(engine::TensorView dst, const std::vector<float>& src, engine::Stream& stream) {
  const int64_t n = static_cast<int64_t>(src.size());
  const engine::Device host = engine::Device::kCpu;
  switch (dst.dtype) {
    case engine::DType::kF32:
      engine::copy(dst, engine::make_view(src.data(), dst.dtype, host, {n}), stream);
      stream.synchronize();  // the caller's src may die next
      break;
    case engine::DType::kF64: {
      std::vector<double> h(src.begin(), src.end());
      engine::copy(dst, engine::make_view(h.data(), dst.dtype, host, {n}), stream);
      stream.synchronize();  // h dies here
      break;
    }
    case engine::DType::kBF16: {
      std::vector<uint16_t> h(src.size());
      for (size_t i = 0; i < src.size(); ++i) h[i] = engine::f32_to_bf16(src[i]);
      engine::copy(dst, engine::make_view(h.data(), dst.dtype, host, {n}), stream);
      stream.synchronize();
      break;
    }
    default:
      ANVIL_CHECK_MSG(false, "GPT init: unsupported parameter dtype " + engine::describe(dst));
  }
}

}  // namespace

double init_normal(uint64_t seed, uint64_t index) {
  const engine::Philox4 r = engine::philox4x32_10(
      static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), kInitStreamTag, 0u,
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  constexpr double kTwoPi = 6.283185307179586476925;
  const double u1 = (static_cast<double>(r.v[0]) + 1.0) / 4294967296.0;  // (0, 1]: log finite
  const double u2 = static_cast<double>(r.v[1]) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
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
    std::vector<float> h(static_cast<size_t>(p.numel()), 0.0f);
    if (absl::EndsWith(name, ".bias")) {
      // zeros
    } else if (absl::StartsWith(name, "ln_f.") || absl::EndsWith(name, "ln_1.weight") ||
               absl::EndsWith(name, "ln_2.weight")) {
      std::fill(h.begin(), h.end(), 1.0f);
    } else {
      const bool resid = absl::EndsWith(name, "c_proj.weight");
      const double sigma = resid ? resid_std : cfg.init_std;
      // Padded vocabulary rows stay 0: no token uses them and their logits are ignored.
      const int64_t n = name == "wte.weight" ? cfg.vocab_size * cfg.d_model : global->numel();
      for (int64_t i = 0; i < p.numel(); ++i) {
        const int64_t g = tp_global_index(p, i, shard.tp, shard.tp_rank);
        if (g >= n) continue;
        h[i] = static_cast<float>(sigma *
                                  init_normal(seed, static_cast<uint64_t>(global->offset + g)));
      }
    }
    // The parameter's elements [p.offset, p.offset + numel) that each target holds.
    auto put = [&](engine::TensorView dst, int64_t lo, int64_t hi) {
      upload(dst, std::vector<float>(h.begin() + (lo - p.offset), h.begin() + (hi - p.offset)),
             stream);
    };
    for (const InitTarget& t : targets) {
      if (t.part == nullptr) {
        put(flat_slice(t.buf, p.offset, {p.numel()}), p.offset, p.offset + p.numel());
        continue;
      }
      for (size_t b = 0; b < t.part->buckets().size(); ++b) {
        const parallel::ZeroPiece piece = t.part->piece(b);
        const int64_t lo = std::max(p.offset, piece.begin);
        const int64_t hi = std::min(p.offset + p.numel(), piece.end);
        if (hi <= lo) continue;
        put(flat_slice(t.buf, piece.shard_offset + lo - piece.begin, {hi - lo}), lo, hi);
      }
    }
    stream.synchronize();  // pageable f32 source h dies at the end of this iteration
  }
}

}  // namespace anvil::model::gpt_detail
