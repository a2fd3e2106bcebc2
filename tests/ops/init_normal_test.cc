// Tests of the deterministic parameter initialization (ops/init_normal.h):
//   kNormal dst[j] = (float)(sigma * N(seed, offset + tp_whole_index(tp, first + j))) or 0 past
//   valid;  kConstant dst[j] = value.
// CPU: N against values pinned from the original host implementation (bit for bit), the TP index
// arithmetic on a q | k | v example, the valid cut-off, constants and the dtype rounding. GPU:
// the CUDA twin against the CPU twin over 2^24 samples and TP shard pieces; CUDA's double
// log/cos may move an f32 value by 1 ulp, so the tests count such elements (printed) and fail
// on anything larger, on NaN, and on elements written outside dst.
#include "ops/init_normal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

TEST(InitNormalCpu, SamplesMatchTheOriginalHostValues) {
  // N(1234, c) and (float)(0.02 N) as anvil's first host initialization computed them.
  struct Golden {
    uint64_t counter;
    double n;
    uint32_t f32_bits_of_0_02n;
  };
  const Golden golden[] = {
      {0, -0x1.4af1810167857p-4, 0xbad3cdc3u},
      {1, 0x1.51479c2853cfp-8, 0x38d7dbe9u},
      {2, 0x1.915450a247889p-1, 0x3c806ce7u},
      {12345, -0x1.4544ea7abe251p-1, 0xbc502c1bu},
      {(uint64_t{1} << 32) + 7, -0x1.4dd6df5715cc7p-5, 0xba55a83du},  // counter word 1 used
  };
  for (const Golden& g : golden) {
    EXPECT_EQ(init_normal_sample(1234, g.counter), g.n) << g.counter;
    EXPECT_EQ(f32_bits(static_cast<float>(0.02 * init_normal_sample(1234, g.counter))),
              g.f32_bits_of_0_02n)
        << g.counter;
  }
  // FNV-1a over the f32 bits of (float)(0.02 N(42, c)), c < 2^20, from the same implementation.
  uint64_t h = 1469598103934665603ull;
  for (uint64_t c = 0; c < (1u << 20); ++c) {
    h = (h ^ f32_bits(static_cast<float>(0.02 * init_normal_sample(42, c)))) * 1099511628211ull;
  }
  EXPECT_EQ(h, 0x1fdb82ba6e2605cull);
}

TEST(InitNormalCpu, TpWholeIndex) {
  // Whole c_attn-like weight [3 * 4, 2] (q | k | v blocks of 4 rows), TP 2: rank 1 holds rows
  // 2-3 of each block, i.e. whole rows 2, 3, 6, 7, 10, 11.
  TpSplit rows{6, 2, 0, 3, 2, 1};
  const int64_t want_rows[] = {2, 3, 6, 7, 10, 11};
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_EQ(tp_whole_index(rows, r * 2 + c), want_rows[r] * 2 + c) << r << "," << c;
    }
  }
  // Row-parallel weight [3, 8] split along columns, TP 4: rank 2 holds columns 4-5.
  TpSplit cols{3, 2, 1, 1, 4, 2};
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(tp_whole_index(cols, r * 2 + c), r * 8 + 4 + c);
  }
  const TpSplit whole{5, 7};
  EXPECT_EQ(tp_whole_index(whole, 23), 23);
}

TEST(InitNormalCpu, ValuesCutOffConstantsAndDtypes) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  InitNormalArgs args;
  args.sigma = 0.5;
  args.seed = 7;
  args.offset = 1000;
  args.tp = TpSplit{8, 4, 0, 1, 2, 1};  // rank 1 of 2 of [16, 4]: whole element = local + 32
  args.first = 3;                       // dst = local 3..27, whole 35..59
  args.valid = 45;                      // whole 35..44 drawn, 45..59 are 0
  const int64_t n = 25;
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(engine::dtype_name(t));
    TensorView dst = pool.empty(t, {n});
    init_normal(args, dst, stream);
    const std::vector<double> got = testing::to_host_f64(dst);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t w = 32 + 3 + j;
      const float f =
          w < 45 ? static_cast<float>(0.5 * init_normal_sample(7, 1000 + static_cast<uint64_t>(w)))
                 : 0.0f;
      double want = f;
      if (t == DType::kBF16) want = engine::bf16_to_f32(engine::f32_to_bf16(f));
      if (t == DType::kF16) want = engine::f16_to_f32(engine::f32_to_f16(f));
      EXPECT_EQ(got[j], want) << j;
    }
  }
  InitNormalArgs ones;
  ones.kind = InitKind::kConstant;
  ones.value = 1.0f;
  ones.tp = TpSplit{9, 1};
  TensorView dst = pool.empty(DType::kBF16, {9});
  init_normal(ones, dst, stream);
  EXPECT_EQ(testing::to_host(dst), std::vector<float>(9, 1.0f));
}

// Calls of more than 2^21 elements run on several threads (an offloaded optimizer's host
// master): every element equals its own draw, across the thread boundaries, with a column-split
// TP shard, a first element and a cut-off.
TEST(InitNormalCpu, LargeCallsSplitOverThreadsChangeNoValue) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  InitNormalArgs args;
  args.sigma = 0.02;
  args.seed = 11;
  args.offset = 77;
  args.tp = TpSplit{1500, 2048, 1, 2, 2, 1};  // rank 1 of 2, two column blocks (like [q | k])
  args.first = 17;
  const int64_t n = 1500 * 2048 - 17;
  args.valid = tp_whole_index(args.tp, n - 1000);  // a cut-off inside the last thread's range
  TensorView dst = pool.empty(DType::kF32, {n});
  init_normal(args, dst, stream);
  const std::vector<float> got = testing::to_host(dst);
  int64_t wrong = 0, drawn = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t w = tp_whole_index(args.tp, 17 + j);
    const float want =
        w < args.valid
            ? static_cast<float>(0.02 * init_normal_sample(11, 77 + static_cast<uint64_t>(w)))
            : 0.0f;
    wrong += f32_bits(got[static_cast<size_t>(j)]) != f32_bits(want);
    drawn += want != 0.0f;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(drawn, n / 2);
}

// ---- GPU vs CPU twin ----------------------------------------------------------------------------

// Bits of `v` (exactly representable) in dtype t, as an integer ordered like the values, so
// that the difference of two is their distance in ulps of t.
int64_t ordered_bits(float v, DType t) {
  const uint32_t bits = t == DType::kBF16  ? engine::f32_to_bf16(v)
                        : t == DType::kF16 ? engine::f32_to_f16(v)
                                           : f32_bits(v);
  const int width = t == DType::kF32 ? 32 : 16;
  const uint32_t sign = uint32_t{1} << (width - 1);
  const int64_t magnitude = bits & (sign - 1);
  return (bits & sign) ? -magnitude : magnitude;
}

// Runs `args` into a GPU buffer of pad + n + pad elements of dtype t (dst is the middle), all
// poisoned first, and into the CPU twin. Checks that the padding kept its poison and that every
// element is within 1 ulp of t of the CPU value (never NaN); returns how many differ at all.
int64_t count_gpu_mismatches(const InitNormalArgs& args, DType t, int64_t n) {
  constexpr int64_t kPad = 64;
  TestStream gpu(Device::kCuda);
  TestStream cpu(Device::kCpu);
  TensorPool gpool(Device::kCuda);
  TensorPool cpool(Device::kCpu);
  TensorView gbuf = gpool.empty(t, {n + 2 * kPad});
  TensorView gdst = gbuf;
  gdst.data = static_cast<char*>(gbuf.data) + kPad * engine::dtype_size(t);
  gdst.shape[0] = n;
  TensorView cdst = cpool.empty(t, {n});
  init_normal(args, gdst, gpu);
  init_normal(args, cdst, cpu);
  gpu.get().synchronize();
  const std::vector<float> all = testing::to_host(gbuf);
  const std::vector<float> want = testing::to_host(cdst);
  for (int64_t i = 0; i < kPad; ++i) {
    EXPECT_TRUE(std::isnan(all[i]) && std::isnan(all[kPad + n + i])) << "wrote outside dst";
  }
  int64_t mismatches = 0, worst = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float g = all[kPad + j], w = want[j];
    if (std::isnan(g) || std::isnan(w)) {  // poison left: an element was not written
      ADD_FAILURE() << "element " << j << " not written: gpu " << g << " cpu " << w;
      ++mismatches;
      continue;
    }
    if (f32_bits(g) == f32_bits(w)) continue;
    ++mismatches;
    const int64_t d = std::llabs(ordered_bits(g, t) - ordered_bits(w, t));
    worst = std::max(worst, d);
    EXPECT_LE(d, 1) << "element " << j << ": gpu " << g << " cpu " << w;
  }
  std::printf(
      "init_normal %s: %lld of %lld elements equal the CPU twin's, %lld differ (max %lld "
      "ulp)\n",
      std::string(engine::dtype_name(t)).c_str(), static_cast<long long>(n - mismatches),
      static_cast<long long>(n), static_cast<long long>(mismatches), static_cast<long long>(worst));
  return mismatches;
}

TEST(InitNormalGpu, MatchesCpuTwinOver16MSamples) {
  ANVIL_SKIP_WITHOUT_GPU();
  InitNormalArgs args;
  args.sigma = 1.0;
  args.seed = 20261203;
  args.offset = (uint64_t{1} << 32) - 5;  // counters cross the 32-bit word boundary
  const int64_t n = int64_t{1} << 24;
  args.tp = TpSplit{n, 1};
  const int64_t mismatches = count_gpu_mismatches(args, DType::kF32, n);
  // Rare by construction (a double result within ~1e-16 relative of an f32 rounding boundary).
  EXPECT_LE(mismatches, n / 100000);
}

TEST(InitNormalGpu, TpShardPiecesAndDtypes) {
  ANVIL_SKIP_WITHOUT_GPU();
  // A c_attn-like shard [3 * 96, 200] (q | k | v) of TP rank 1 of 2, from local element 1001 on
  // (a ZeRO piece boundary), with the padded-vocabulary cut-off inside the piece.
  InitNormalArgs args;
  args.sigma = 0.02;
  args.seed = 1234;
  args.offset = 4096;
  args.tp = TpSplit{3 * 96, 200, 0, 3, 2, 1};
  args.first = 1001;
  args.valid = 100000;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(engine::dtype_name(t));
    count_gpu_mismatches(args, t, 3 * 96 * 200 - 1001 - 17);
  }
  InitNormalArgs ones;
  ones.kind = InitKind::kConstant;
  ones.value = 1.0f;
  ones.tp = TpSplit{777, 1};
  EXPECT_EQ(count_gpu_mismatches(ones, DType::kBF16, 777), 0);
}

}  // namespace
}  // namespace anvil::ops
