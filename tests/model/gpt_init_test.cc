// Tests of the GPT-2 initialization (model/stack/gpt_init.h) into the targets GptModel::create
// uses: the compute copy (act dtype, whole flat buffer) and the f32 master (whole, or a ZeRO
// shard), for whole models, TP shards (both ranks of TP 2), a pipeline stage and a ZeRO partition.
// CPU: bit for bit the values of the original host initialization (kept below, verbatim, as
// the reference), and ops::tp_whole_index equal to model::tp_global_index for every element.
// GPU: the device initialization against the CPU one; elements may differ by 1 ulp (CUDA's
// double log/cos, see gpt_init.h): the test counts them (printed) and fails on anything more.
// Buffers are poisoned (NaN) first: every element outside the parameters must stay poisoned
// (init never writes padding) and every element inside must be written.
#include "model/stack/gpt_init.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/dtype.h"
#include "engine/philox.h"
#include "gtest/gtest.h"
#include "model/stack/gpt_layout.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::gpt_detail {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;

constexpr uint64_t kSeed = 1234;

// ---- the original host initialization, verbatim (the reference) ------------------------------

double original_init_normal(uint64_t seed, uint64_t index) {
  const engine::Philox4 r = engine::philox4x32_10(
      static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0x494e4954u, 0u,
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  constexpr double kTwoPi = 6.283185307179586476925;
  const double u1 = (static_cast<double>(r.v[0]) + 1.0) / 4294967296.0;  // (0, 1]: log finite
  const double u2 = static_cast<double>(r.v[1]) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

// Parameter p's f32 values as the original host loop computed them.
std::vector<float> original_values(const GptConfig& cfg, const GptShard& shard, const Param& p,
                                   const ParamTable& whole, uint64_t seed) {
  const double resid_std = cfg.init_std / std::sqrt(2.0 * static_cast<double>(cfg.n_layers));
  const Param* global = whole.find(p.name);
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
    const int64_t n = name == "wte.weight" ? cfg.vocab_size * cfg.d_model : global->numel();
    for (int64_t i = 0; i < p.numel(); ++i) {
      const int64_t g = tp_global_index(p, i, shard.tp, shard.tp_rank);
      if (g >= n) continue;
      h[i] = static_cast<float>(
          sigma * original_init_normal(seed, static_cast<uint64_t>(global->offset + g)));
    }
  }
  return h;
}

// ---- layouts ------------------------------------------------------------------------------------

struct Layout {
  GptConfig cfg;
  GptShard shard;
  ParamTable table;
  std::optional<parallel::ZeroPartition> part;  // ZeRO: the master is this rank's shard
};

GptConfig tiny_config() {
  GptConfig c;
  c.vocab_size = 1000;  // padded to 1024: the last 24 rows of wte stay 0
  c.max_seq_len = 64;
  c.d_model = 64;
  c.n_heads = 4;
  c.n_layers = 3;
  return c;
}

// tp / tp_rank; zero_dp > 1: a ZeRO-1 partition for rank zero_rank; first_layer > 0: a pipeline
// stage holding layers [first_layer, n_layers) and the head.
Layout make_layout(const GptConfig& cfg, int tp, int tp_rank, int zero_dp, int zero_rank,
                   int64_t first_layer = 0) {
  Layout s;
  s.cfg = cfg;
  s.shard.tp = tp;
  s.shard.tp_rank = tp_rank;
  if (first_layer > 0) {
    std::vector<int64_t> layers;
    for (int64_t l = first_layer; l < cfg.n_layers; ++l) layers.push_back(l);
    s.shard.chunks = {layers};
    s.shard.pre = false;
  }
  if (zero_dp > 1) {
    s.shard.zero_stage = 1;
    s.shard.zero_dp = zero_dp;
    s.shard.zero_rank = zero_rank;
  }
  EXPECT_TRUE(s.shard.validate(cfg).ok());
  s.table = make_param_table(cfg, s.shard);
  if (zero_dp > 1) {
    std::vector<parallel::ZeroBucket> zb;
    for (const ParamTable::Bucket& k : s.table.buckets())
      zb.push_back({k.begin, k.decay_end, k.end});
    auto part = parallel::ZeroPartition::create(zb, zero_dp, zero_rank);
    EXPECT_TRUE(part.ok()) << part.status();
    s.part = std::move(part).value();
  }
  return s;
}

std::vector<Layout> layouts(const GptConfig& cfg) {
  std::vector<Layout> v;
  v.push_back(make_layout(cfg, 1, 0, 1, 0));
  v.push_back(make_layout(cfg, 2, 0, 1, 0));
  v.push_back(make_layout(cfg, 2, 1, 2, 1));     // TP rank 1 with a ZeRO shard of DP rank 1
  v.push_back(make_layout(cfg, 2, 0, 2, 0, 1));  // a pipeline stage (layers 1.., head)
  return v;
}

// The two targets, poisoned, on `pool`'s device: value [flat] act, master [flat] or [flat / dp]
// f32.
struct Targets {
  TensorView value, master;
};

Targets init_on(const Layout& s, TensorPool& pool, DType act, engine::Stream& stream) {
  const int64_t n = s.table.flat_numel();
  Targets t;
  t.value = pool.empty(act, {n});
  t.master = pool.empty(DType::kF32, {s.part ? s.part->shard_numel() : n});
  const parallel::ZeroPartition* part = s.part ? &*s.part : nullptr;
  init_params(s.cfg, s.shard, s.table, {{t.value, nullptr}, {t.master, part}}, kSeed, stream);
  return t;
}

// What the original host init put into a target [size] (NaN where it wrote nothing).
std::vector<float> original_target(const Layout& s, int64_t size,
                                   const parallel::ZeroPartition* part) {
  std::vector<float> out(static_cast<size_t>(size), std::numeric_limits<float>::quiet_NaN());
  const ParamTable whole = make_param_table(s.cfg);
  for (const Param& p : s.table.all()) {
    const std::vector<float> h = original_values(s.cfg, s.shard, p, whole, kSeed);
    auto put = [&](int64_t at, int64_t lo, int64_t hi) {
      std::copy(h.begin() + (lo - p.offset), h.begin() + (hi - p.offset), out.begin() + at);
    };
    if (part == nullptr) {
      put(p.offset, p.offset, p.offset + p.numel());
      continue;
    }
    for (size_t b = 0; b < part->buckets().size(); ++b) {
      const parallel::ZeroPiece piece = part->piece(b);
      const int64_t lo = std::max(p.offset, piece.begin);
      const int64_t hi = std::min(p.offset + p.numel(), piece.end);
      if (hi > lo) put(piece.shard_offset + lo - piece.begin, lo, hi);
    }
  }
  return out;
}

uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

// v (exact in t) as an integer ordered like the values: differences are ulps of t.
int64_t ordered_bits(float v, DType t) {
  const uint32_t bits = t == DType::kBF16 ? engine::f32_to_bf16(v) : f32_bits(v);
  const int width = t == DType::kBF16 ? 16 : 32;
  const uint32_t sign = uint32_t{1} << (width - 1);
  const int64_t magnitude = bits & (sign - 1);
  return (bits & sign) ? -magnitude : magnitude;
}

float round_to(float v, DType t) {
  return t == DType::kBF16 ? engine::bf16_to_f32(engine::f32_to_bf16(v)) : v;
}

// got vs want (want NaN: must stay poisoned). Elements may differ by max_ulps ulps of t;
// returns how many differ at all.
int64_t compare(const std::vector<float>& got, const std::vector<float>& want, DType t,
                int64_t max_ulps, const char* what) {
  EXPECT_EQ(got.size(), want.size());
  int64_t differ = 0, worst = 0, written = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      if (std::isnan(want[i]) != std::isnan(got[i])) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i]
                      << " (NaN = not written)";
        ++differ;
      }
      continue;
    }
    ++written;
    const float w = round_to(want[i], t);
    if (f32_bits(got[i]) == f32_bits(w)) continue;
    ++differ;
    const int64_t d = std::llabs(ordered_bits(got[i], t) - ordered_bits(w, t));
    worst = std::max(worst, d);
    EXPECT_LE(d, max_ulps) << what << "[" << i << "]: got " << got[i] << ", want " << w;
  }
  EXPECT_GT(written, 0) << what;
  std::printf("%s (%s): %lld of %lld parameter elements exact, %lld differ (max %lld ulp)\n", what,
              std::string(engine::dtype_name(t)).c_str(), static_cast<long long>(written - differ),
              static_cast<long long>(written), static_cast<long long>(differ),
              static_cast<long long>(worst));
  return differ;
}

TEST(GptInit, TpSplitMatchesTpGlobalIndex) {
  GptConfig cfg = tiny_config();
  cfg.vocab_multiple = 512;  // padded 1024 splits over TP 4
  for (int tp : {1, 2, 4}) {
    for (int r = 0; r < tp; ++r) {
      const Layout s = make_layout(cfg, tp, r, 1, 0);
      for (const Param& p : s.table.all()) {
        const ops::TpSplit split = tp_split(p, tp, r);
        for (int64_t i = 0; i < p.numel(); ++i) {
          ASSERT_EQ(ops::tp_whole_index(split, i), tp_global_index(p, i, tp, r))
              << p.name << " tp " << tp << " rank " << r << " element " << i;
        }
      }
    }
  }
}

TEST(GptInit, CpuEqualsOriginalHostInitBitForBit) {
  for (const Layout& s : layouts(tiny_config())) {
    SCOPED_TRACE(::testing::Message() << "tp " << s.shard.tp << " rank " << s.shard.tp_rank
                                      << " zero dp " << s.shard.zero_dp << " pre " << s.shard.pre);
    for (DType act : {DType::kF32, DType::kBF16}) {
      TestStream stream(Device::kCpu);
      TensorPool pool(Device::kCpu);
      const Targets t = init_on(s, pool, act, stream);
      const std::vector<float> value = original_target(s, s.table.flat_numel(), nullptr);
      const std::vector<float> master =
          original_target(s, t.master.numel(), s.part ? &*s.part : nullptr);
      EXPECT_EQ(compare(testing::to_host(t.value), value, act, 0, "value"), 0);
      EXPECT_EQ(compare(testing::to_host(t.master), master, DType::kF32, 0, "master"), 0);
    }
  }
}

TEST(GptInitGpu, DeviceInitWithinOneUlpOfHost) {
  ANVIL_SKIP_WITHOUT_GPU();
  // Big enough to see rare 1-ulp differences: about 17M elements per layout and target.
  GptConfig cfg;
  cfg.vocab_size = 50257;
  cfg.vocab_multiple = 256;
  cfg.max_seq_len = 1024;
  cfg.d_model = 256;
  cfg.n_heads = 4;
  cfg.n_layers = 4;
  int64_t differ = 0;
  for (const Layout& s : layouts(cfg)) {
    SCOPED_TRACE(::testing::Message() << "tp " << s.shard.tp << " rank " << s.shard.tp_rank
                                      << " zero dp " << s.shard.zero_dp << " pre " << s.shard.pre);
    TestStream gpu(Device::kCuda);
    TestStream cpu(Device::kCpu);
    TensorPool gpool(Device::kCuda);
    TensorPool cpool(Device::kCpu);
    const Targets g = init_on(s, gpool, DType::kBF16, gpu);
    const Targets c = init_on(s, cpool, DType::kBF16, cpu);
    gpu.get().synchronize();
    differ +=
        compare(testing::to_host(g.value), testing::to_host(c.value), DType::kBF16, 1, "value");
    differ +=
        compare(testing::to_host(g.master), testing::to_host(c.master), DType::kF32, 1, "master");
  }
  std::printf("device init: %lld elements differ from the host by 1 ulp in all layouts\n",
              static_cast<long long>(differ));
}

}  // namespace
}  // namespace anvil::model::gpt_detail
