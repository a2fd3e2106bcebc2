// Tests of HF rope_scaling in the rotary frequencies (ops/rotary.h RotaryScaling, computed in
// ops/rotary_detail.h for the CPU twin, the CUDA kernel, training and inference):
//   fixture: rotary_inv_freqs equals tests/ops/fixtures/rope_inv_freq.txt, written by
//     rope_inv_freq.py, an independent transcription of transformers' default, linear and
//     llama3 (_compute_llama3_parameters) with torch's f32 arithmetic emulated in Python:
//     bitwise, or within 1 f32 ulp where the default base^e differs (std::pow vs Python pow);
//   closed forms of llama3's bands: wavelengths 2 pi / inv_freq below
//     original / high_freq_factor keep the unscaled value, above original / low_freq_factor it
//     is divided by the factor, and in between lies between those two;
//   linear: rotating at position f * p with factor f equals the unscaled rotation at p;
//   GPU: the kernel with llama3 scaling against the CPU twin (skipped without a device).
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ops/rotary.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;

struct FixtureCase {
  std::string name;
  float base = 0;
  int64_t rot_dim = 0;
  RotaryScaling scaling;
  std::vector<float> want;
};

std::string fixture_path() {
  const std::string here = __FILE__;
  const std::string beside = here.substr(0, here.rfind('/')) + "/fixtures/rope_inv_freq.txt";
  if (std::ifstream(beside).good()) return beside;
  return "tests/ops/fixtures/rope_inv_freq.txt";  // from the source root (ctest)
}

std::vector<FixtureCase> read_fixture() {
  std::ifstream in(fixture_path());
  EXPECT_TRUE(in.good()) << fixture_path();
  std::vector<FixtureCase> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    FixtureCase c;
    std::string type;
    s >> c.name >> c.base >> c.rot_dim >> type >> c.scaling.factor >> c.scaling.low_freq_factor >>
        c.scaling.high_freq_factor >> c.scaling.original_max_position;
    c.scaling.type = type == "linear"   ? RotaryScalingType::kLinear
                     : type == "llama3" ? RotaryScalingType::kLlama3
                                        : RotaryScalingType::kNone;
    for (std::string v; s >> v;) c.want.push_back(std::strtof(v.c_str(), nullptr));
    out.push_back(c);
  }
  return out;
}

TEST(RotaryScaling, MatchesTranscribedHfFormulas) {
  const std::vector<FixtureCase> cases = read_fixture();
  ASSERT_EQ(cases.size(), 4u);
  for (const FixtureCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<float> got = rotary_inv_freqs(c.base, c.rot_dim, c.scaling);
    ASSERT_EQ(got.size(), c.want.size());
    int exact = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      exact += got[i] == c.want[i];
      EXPECT_LE(std::abs(got[i] - c.want[i]),
                std::nextafter(c.want[i], 1e30f) - c.want[i])  // <= 1 ulp
          << "i " << i << ": " << got[i] << " vs " << c.want[i];
    }
    EXPECT_GE(exact, static_cast<int>(got.size()) - 2) << "more than 2 values off by an ulp";
  }
}

TEST(RotaryScaling, Llama3Bands) {
  RotaryScaling sc;
  sc.type = RotaryScalingType::kLlama3;
  sc.factor = 8.0f, sc.low_freq_factor = 1.0f, sc.high_freq_factor = 4.0f;
  sc.original_max_position = 8192;
  const std::vector<float> plain = rotary_inv_freqs(500000.0f, 128, {});
  const std::vector<float> got = rotary_inv_freqs(500000.0f, 128, sc);
  int high = 0, low = 0, mid = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 8192.0 / 4) {
      ++high;
      EXPECT_EQ(got[i], plain[i]) << i;
    } else if (wavelen > 8192.0) {
      ++low;
      EXPECT_NEAR(got[i], plain[i] / 8.0, 1e-7 * plain[i]) << i;
    } else {
      ++mid;
      EXPECT_GE(got[i], plain[i] / 8.0 * (1 - 1e-6)) << i;
      EXPECT_LE(got[i], plain[i] * (1 + 1e-6)) << i;
      // s = (8192 / wavelen - 1) / 3: (1 - s) f / 8 + s f.
      const double s = (8192.0 / wavelen - 1.0) / 3.0;
      EXPECT_NEAR(got[i], (1 - s) * plain[i] / 8 + s * plain[i], 1e-5 * plain[i]) << i;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);
}

TEST(RotaryScaling, LinearDividesPositions) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  RotaryArgs plain{6, 2, 8, 8, 10000.0f};
  RotaryArgs lin = plain;
  lin.scaling.type = RotaryScalingType::kLinear;
  lin.scaling.factor = 2.0f;
  const std::vector<float> x = testing::random_uniform(6 * 16, 3);
  TensorView a = pool.from(x, DType::kF64, {6, 16}), b = pool.from(x, DType::kF64, {6, 16});
  rotary_forward(plain, a, pool.from_i32({0, 1, 3, 7, 100, 1000}, {6}), stream);
  rotary_forward(lin, b, pool.from_i32({0, 2, 6, 14, 200, 2000}, {6}), stream);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(b), testing::to_host(a), {1e-5, 1e-6, 1e-9}));
  // ... and differs from the unscaled rotation at those positions.
  TensorView c = pool.from(x, DType::kF64, {6, 16});
  rotary_forward(plain, c, pool.from_i32({0, 2, 6, 14, 200, 2000}, {6}), stream);
  EXPECT_FALSE(testing::tensors_near(testing::to_host(c), testing::to_host(a), {1e-3, 1e-3, 1.0}));
}

TEST(RotaryScalingGpu, Llama3MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  RotaryArgs args{37, 4, 128, 128, 500000.0f};
  args.scaling.type = RotaryScalingType::kLlama3;
  args.scaling.factor = 8.0f;
  args.scaling.original_max_position = 64;  // all three bands at head_dim 128
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  const std::vector<float> x = testing::random_uniform(37 * 512, 5);
  const std::vector<int32_t> pos = testing::random_ints(37, 6, 0, 4096);
  TensorView c = cpool.from(x, DType::kF32, {37, 512}), g = gpool.from(x, DType::kF32, {37, 512});
  rotary_forward(args, c, cpool.from_i32(pos, {37}), cs);
  rotary_forward(args, g, gpool.from_i32(pos, {37}), gs);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(g), testing::to_host(c), {1e-5, 1e-5, 1e-9}));
}

}  // namespace
}  // namespace anvil::ops
