// Tests of token + learned position embedding (ops/embedding.h), vocab-parallel capable:
//   out[t] = [tokens[t] in shard] wte[tokens[t] - vocab_start] + wpe[positions[t]] (=);
//   dwte[tokens[t] - vocab_start] (tokens in the shard), dwpe[positions[t]] += dout[t] (+=)
// CPU twin: closed form, central finite differences in double, += (2x), argument checks; the
// vocabulary split in 2 and 4 shards (wpe on shard 0 only) sums to the unsplit op, and each
// shard's dwte equals its rows of the unsplit dwte.
// GPU: against the CPU twin on random data with repeated ids, bf16 and f32, awkward shapes,
// shards (ids of other shards, on both sides) with and without wpe.
#include "ops/embedding.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/memory.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

std::vector<double> as_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double norm2(const std::vector<double>& a) { return dot(a, a); }

TEST(EmbeddingCpu, ForwardIsRowSum) {
  const EmbeddingArgs args{6, 5, 7, 4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<int32_t> tok = {3, 0, 6, 3, 3, 1}, pos = {0, 1, 2, 3, 0, 2};
  const std::vector<float> wte = testing::random_uniform(7 * 5, 1);
  const std::vector<float> wpe = testing::random_uniform(4 * 5, 2);
  TensorView out = pool.empty(DType::kF32, {6, 5});
  embedding_forward(args, out, pool.from_i32(tok, {6}), pool.from_i32(pos, {6}),
                    pool.from(wte, DType::kF32, {7, 5}), pool.from(wpe, DType::kF32, {4, 5}),
                    stream);
  const std::vector<float> got = testing::to_host(out);
  for (int t = 0; t < 6; ++t) {
    for (int c = 0; c < 5; ++c) {
      EXPECT_EQ(got[t * 5 + c], wte[tok[t] * 5 + c] + wpe[pos[t] * 5 + c]) << t << "," << c;
    }
  }
}

// L = sum(out * w); dL/dwte and dL/dwpe from backward(dout = w) against central differences.
TEST(EmbeddingCpu, BackwardMatchesFiniteDifferences) {
  const EmbeddingArgs args{6, 5, 7, 4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView tok = pool.from_i32({3, 0, 6, 3, 3, 1}, {6});
  const TensorView pos = pool.from_i32({0, 1, 2, 3, 0, 2}, {6});
  const std::vector<double> wte0 = as_f64(testing::random_uniform(7 * 5, 3));
  const std::vector<double> wpe0 = as_f64(testing::random_uniform(4 * 5, 4));
  const std::vector<double> w = as_f64(testing::random_uniform(6 * 5, 5));
  TensorView wte = pool.from_f64(wte0, {7, 5});
  TensorView wpe = pool.from_f64(wpe0, {4, 5});
  TensorView out = pool.empty(DType::kF64, {6, 5});

  auto loss = [&](const std::vector<double>& te, const std::vector<double>& pe) {
    std::memcpy(wte.data, te.data(), te.size() * sizeof(double));
    std::memcpy(wpe.data, pe.data(), pe.size() * sizeof(double));
    embedding_forward(args, out, tok, pos, wte, wpe, stream);
    return dot(testing::to_host_f64(out), w);
  };
  const std::vector<double> num_te =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, wpe0); }, wte0);
  const std::vector<double> num_pe =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(wte0, v); }, wpe0);

  TensorView dwte = pool.from_f64(std::vector<double>(7 * 5, 0.0), {7, 5});
  TensorView dwpe = pool.from_f64(std::vector<double>(4 * 5, 0.0), {4, 5});
  embedding_backward(args, dwte, dwpe, pool.from_f64(w, {6, 5}), tok, pos, stream);
  const std::vector<double> g_te = testing::to_host_f64(dwte), g_pe = testing::to_host_f64(dwpe);
  EXPECT_GT(norm2(g_te), 0.0);
  EXPECT_GT(norm2(g_pe), 0.0);
  // Row 2 of wte, 4 and 5 are unused: their gradient is exactly zero.
  for (int c = 0; c < 5; ++c) EXPECT_EQ(g_te[2 * 5 + c], 0.0);
  EXPECT_TRUE(testing::tensors_near(g_te, num_te, Tol{1e-8, 1e-7}));
  EXPECT_TRUE(testing::tensors_near(g_pe, num_pe, Tol{1e-8, 1e-7}));

  // += : a second call doubles (exact in double).
  embedding_backward(args, dwte, dwpe, pool.from_f64(w, {6, 5}), tok, pos, stream);
  const std::vector<double> g2 = testing::to_host_f64(dwte);
  for (size_t i = 0; i < g2.size(); ++i) EXPECT_EQ(g2[i], 2.0 * g_te[i]) << i;
}

TEST(EmbeddingCpu, BackwardAccumulatesIntoF32) {
  const EmbeddingArgs args{4, 3, 5, 4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> start = testing::random_uniform(5 * 3, 6);
  const std::vector<float> dout = testing::random_uniform(4 * 3, 7);
  TensorView dwte = pool.from(start, DType::kF32, {5, 3});
  TensorView dwpe = pool.from(std::vector<float>(4 * 3, 0.0f), DType::kF32, {4, 3});
  embedding_backward(args, dwte, dwpe, pool.from(dout, DType::kBF16, {4, 3}),
                     pool.from_i32({1, 4, 1, 0}, {4}), pool.from_i32({0, 1, 2, 3}, {4}), stream);
  const std::vector<float> d = testing::round_bf16(dout);
  const std::vector<float> got = testing::to_host(dwte);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(got[1 * 3 + c], (start[1 * 3 + c] + d[0 * 3 + c]) + d[2 * 3 + c]);
    EXPECT_EQ(got[4 * 3 + c], start[4 * 3 + c] + d[1 * 3 + c]);
    EXPECT_EQ(got[2 * 3 + c], start[2 * 3 + c]);
  }
}

// Ids beyond this shard's rows are legal (another rank's), and with wpe empty only wte counts.
TEST(EmbeddingCpu, ShardIgnoresOtherIdsAndEmptyWpe) {
  const EmbeddingArgs args{/*tokens=*/5, /*dim=*/3, /*vocab=*/4, /*max_pos=*/0, /*vocab_start=*/4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<int32_t> tok = {0, 4, 7, 8, 100};  // rows -, 0, 3, -, -
  const std::vector<float> wte = testing::random_uniform(4 * 3, 21);
  TensorView out = pool.empty(DType::kF32, {5, 3});
  embedding_forward(args, out, pool.from_i32(tok, {5}), TensorView{},
                    pool.from(wte, DType::kF32, {4, 3}), TensorView{}, stream);
  const std::vector<float> got = testing::to_host(out);
  const int row[] = {-1, 0, 3, -1, -1};
  for (int t = 0; t < 5; ++t) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(got[t * 3 + c], row[t] < 0 ? 0.0f : wte[row[t] * 3 + c]) << t << "," << c;
    }
  }
  const std::vector<float> start = testing::random_uniform(4 * 3, 22);
  const std::vector<float> dout = testing::random_uniform(5 * 3, 23);
  TensorView dwte = pool.from(start, DType::kF32, {4, 3});
  embedding_backward(args, dwte, TensorView{}, pool.from(dout, DType::kF32, {5, 3}),
                     pool.from_i32(tok, {5}), TensorView{}, stream);
  const std::vector<float> g = testing::to_host(dwte);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(g[0 * 3 + c], start[0 * 3 + c] + dout[1 * 3 + c]);
    EXPECT_EQ(g[3 * 3 + c], start[3 * 3 + c] + dout[2 * 3 + c]);
    EXPECT_EQ(g[1 * 3 + c], start[1 * 3 + c]);
    EXPECT_EQ(g[2 * 3 + c], start[2 * 3 + c]);
  }
}

// The vocabulary split in `shards` equal slices (Megatron's TP layout): forward outputs summed
// over shards (wpe on shard 0 only) equal the unsplit forward, and each shard's dwte equals its
// rows of the unsplit dwte (dwpe on shard 0 equals the unsplit dwpe). Exact: every value is one
// wte and one wpe term added in double and rounded once, and the backward adds the same
// addends to each row in the same (token) order.
class EmbeddingShardsCpu : public ::testing::TestWithParam<int> {};

TEST_P(EmbeddingShardsCpu, SumOfShardsIsUnsplitOp) {
  const int shards = GetParam();
  const int64_t n = 23, dim = 6, vocab = 16, max_pos = 5, shard_vocab = vocab / shards;
  const EmbeddingArgs full{n, dim, vocab, max_pos};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<int32_t> tok_host = testing::random_ints(n, 31, 0, vocab);
  const TensorView tok = pool.from_i32(tok_host, {n});
  const TensorView pos = pool.from_i32(testing::random_ints(n, 32, 0, max_pos), {n});
  const TensorView wte =
      pool.from(testing::random_uniform(vocab * dim, 33), DType::kF32, {vocab, dim});
  const TensorView wpe =
      pool.from(testing::random_uniform(max_pos * dim, 34), DType::kF32, {max_pos, dim});
  const std::vector<float> dout_host = testing::random_uniform(n * dim, 35);
  const TensorView dout = pool.from(dout_host, DType::kF32, {n, dim});
  const std::vector<float> dwte0 = testing::random_uniform(vocab * dim, 36);
  const std::vector<float> dwpe0 = testing::random_uniform(max_pos * dim, 37);

  TensorView ref_out = pool.empty(DType::kF32, {n, dim});
  embedding_forward(full, ref_out, tok, pos, wte, wpe, stream);
  TensorView ref_dwte = pool.from(dwte0, DType::kF32, {vocab, dim});
  TensorView ref_dwpe = pool.from(dwpe0, DType::kF32, {max_pos, dim});
  embedding_backward(full, ref_dwte, ref_dwpe, dout, tok, pos, stream);
  const std::vector<float> want_dwte = testing::to_host(ref_dwte);

  std::vector<float> sum(n * dim, 0.0f);
  for (int k = 0; k < shards; ++k) {
    const int64_t start = k * shard_vocab;
    const bool first = k == 0;
    // Shards other than the first carry no position table (max_pos 0, positions empty).
    const EmbeddingArgs args{n, dim, shard_vocab, first ? max_pos : 0, start};
    const TensorView shard_pos = first ? pos : TensorView{};
    TensorView out = pool.empty(DType::kF32, {n, dim});
    embedding_forward(args, out, tok, shard_pos,
                      engine::slice_rows(wte, start, start + shard_vocab),
                      first ? wpe : TensorView{}, stream);
    const std::vector<float> o = testing::to_host(out);
    for (int64_t i = 0; i < n * dim; ++i) sum[i] += o[i];

    const std::vector<float> rows(dwte0.begin() + start * dim,
                                  dwte0.begin() + (start + shard_vocab) * dim);
    TensorView dwte = pool.from(rows, DType::kF32, {shard_vocab, dim});
    TensorView dwpe = first ? pool.from(dwpe0, DType::kF32, {max_pos, dim}) : TensorView{};
    embedding_backward(args, dwte, dwpe, dout, tok, shard_pos, stream);
    const std::vector<float> got = testing::to_host(dwte);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want_dwte.begin() + start * dim)) << k;
    if (first) {
      EXPECT_EQ(testing::to_host(dwpe), testing::to_host(ref_dwpe));
    }
    // Rows of this shard that no token hit keep their starting value.
    for (int64_t r = 0; r < shard_vocab; ++r) {
      if (std::count(tok_host.begin(), tok_host.end(), start + r) > 0) continue;
      for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(got[r * dim + c], rows[r * dim + c]);
    }
  }
  EXPECT_EQ(sum, testing::to_host(ref_out));
}

INSTANTIATE_TEST_SUITE_P(Shards, EmbeddingShardsCpu, ::testing::Values(2, 4));

TEST(EmbeddingCpuDeathTest, RejectsBadArguments) {
  const EmbeddingArgs args{2, 4, 3, 2};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView wte = pool.from(testing::random_uniform(12, 8), DType::kF32, {3, 4});
  const TensorView wpe = pool.from(testing::random_uniform(8, 9), DType::kF32, {2, 4});
  const TensorView pos = pool.from_i32({0, 1}, {2});
  TensorView out = pool.empty(DType::kF32, {2, 4});
  EXPECT_DEATH(embedding_forward(args, out, pool.from_i32({0, -1}, {2}), pos, wte, wpe, stream),
               "tokens\\[1\\] = -1 is outside");
  EXPECT_DEATH(embedding_forward(args, out, pos, pool.from_i32({0, 2}, {2}), wte, wpe, stream),
               "positions\\[1\\] = 2 is outside");
  EXPECT_DEATH(embedding_forward(EmbeddingArgs{2, 4, 3, 2, -1}, out, pos, pos, wte, wpe, stream),
               "vocab_start=-1");
  // wpe given: positions are required.
  EXPECT_DEATH(embedding_forward(args, out, pos, TensorView{}, wte, wpe, stream),
               "positions must be");
  EXPECT_DEATH(
      embedding_forward(args, pool.empty(DType::kBF16, {2, 4}), pos, pos, wte, wpe, stream),
      "out must be");
  TensorView dwte = pool.empty(DType::kBF16, {3, 4});
  EXPECT_DEATH(
      embedding_backward(args, dwte, pool.empty(DType::kF32, {2, 4}), out, pos, pos, stream),
      "dwte must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin.

struct GpuCase {
  int64_t tokens, dim, vocab, max_pos;
  DType dtype;
  int64_t vocab_start = 0;
  bool with_wpe = true;  // false: wpe, dwpe and positions empty
};

class EmbeddingGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(EmbeddingGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const EmbeddingArgs args{p.tokens, p.dim, p.vocab, p.max_pos, p.vocab_start};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  // Few distinct ids: many repeats, so runs of equal ids really accumulate. A shard
  // (vocab_start > 0) also sees ids of other shards on both sides of its range.
  const int64_t margin = p.vocab_start > 0 ? 3 : 0;
  const std::vector<int32_t> tok = testing::random_ints(
      p.tokens, 11, static_cast<int32_t>(std::max<int64_t>(p.vocab_start - margin, 0)),
      static_cast<int32_t>(p.vocab_start + std::min<int64_t>(p.vocab, 9) + margin));
  const std::vector<int32_t> pos = testing::random_ints(p.tokens, 12, 0, p.max_pos);
  const std::vector<float> wte = testing::random_uniform(p.vocab * p.dim, 13);
  const std::vector<float> wpe = testing::random_uniform(p.max_pos * p.dim, 14);
  const std::vector<float> dout = testing::random_uniform(p.tokens * p.dim, 15);
  const std::vector<float> dwte0 = testing::random_uniform(p.vocab * p.dim, 16);
  const std::vector<float> dwpe0 = testing::random_uniform(p.max_pos * p.dim, 17);

  // Forward then backward on one device; returns {out, dwte, dwpe} (dwpe empty without wpe).
  auto run = [&](TensorPool& pool, engine::Stream& stream) {
    const TensorView t = pool.from_i32(tok, {p.tokens});
    const TensorView ps = p.with_wpe ? pool.from_i32(pos, {p.tokens}) : TensorView{};
    TensorView out = pool.empty(p.dtype, {p.tokens, p.dim});  // poisoned
    embedding_forward(args, out, t, ps, pool.from(wte, p.dtype, {p.vocab, p.dim}),
                      p.with_wpe ? pool.from(wpe, p.dtype, {p.max_pos, p.dim}) : TensorView{},
                      stream);
    TensorView dwte = pool.from(dwte0, DType::kF32, {p.vocab, p.dim});
    TensorView dwpe = p.with_wpe ? pool.from(dwpe0, DType::kF32, {p.max_pos, p.dim}) : TensorView{};
    embedding_backward(args, dwte, dwpe, pool.from(dout, p.dtype, {p.tokens, p.dim}), t, ps,
                       stream);
    return std::vector<std::vector<float>>{
        testing::to_host(out), testing::to_host(dwte),
        p.with_wpe ? testing::to_host(dwpe) : std::vector<float>{}};
  };
  const std::vector<std::vector<float>> c = run(cpool, cs), g = run(gpool, gs);
  // Both add (at most) two identical values in (at least) f32 and round once: exact.
  EXPECT_TRUE(testing::tensors_near(g[0], c[0], Tol{0.0, 0.0, 0.0}));
  // The GPU adds a run inside one sorted chunk in the CPU's order (bitwise), a run across
  // chunks as per-chunk partial sums: f32 reassociation of up to `tokens` terms of size <= 1
  // onto a start value in [-1, 1], so an error of a few ulps of the sum per term at most.
  const Tol reassociated{4e-7 * static_cast<double>(p.tokens), 1e-6, 1e-10};
  EXPECT_TRUE(testing::tensors_near(g[1], c[1], reassociated));
  if (p.with_wpe) {
    EXPECT_TRUE(testing::tensors_near(g[2], c[2], reassociated));
  }
  // Deterministic: a second GPU run gives the same bits.
  const std::vector<std::vector<float>> g2 = run(gpool, gs);
  EXPECT_TRUE(testing::tensors_near(g2[1], g[1], Tol{0.0, 0.0, 0.0}));
  if (p.with_wpe) {
    EXPECT_TRUE(testing::tensors_near(g2[2], g[2], Tol{0.0, 0.0, 0.0}));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmbeddingGpu,
    ::testing::Values(GpuCase{1, 8, 5, 3, DType::kBF16}, GpuCase{1, 8, 5, 3, DType::kF32},
                      GpuCase{256, 768, 1000, 128, DType::kBF16},
                      GpuCase{256, 768, 1000, 128, DType::kF32},
                      GpuCase{37, 13, 50, 40, DType::kBF16},  // dim % 8 != 0: scalar path
                      GpuCase{37, 13, 50, 40, DType::kF32},
                      GpuCase{9, 4100, 17, 9, DType::kBF16},  // 4100 % 8 != 0, % 4 == 0
                      GpuCase{9, 4100, 17, 9, DType::kF32},
                      // Vocabulary shards: ids of other shards below and above the range.
                      GpuCase{256, 768, 1000, 128, DType::kBF16, 2000, true},
                      GpuCase{256, 768, 1000, 128, DType::kF32, 2000, false},
                      GpuCase{37, 13, 50, 40, DType::kBF16, 50, false},
                      GpuCase{37, 13, 50, 40, DType::kF32, 150, true},
                      // Two ids (BERT's token types): runs of ~4K rows span many chunks.
                      GpuCase{8192, 1024, 2, 512, DType::kBF16},
                      GpuCase{8191, 13, 2, 7, DType::kF32},
                      GpuCase{4099, 768, 3, 64, DType::kBF16, 3, false}));

}  // namespace
}  // namespace anvil::ops
