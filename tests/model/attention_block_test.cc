// Tests of the attention block (model/blocks/attention.h) on the CPU in double.
//  - Gradients: for self-attention (flash: no positions, causal or not, padding and document
//    masks, rotary, ALiBi, relative buckets, dropout; unfused: causal with document masks and
//    dropout, with and without recomputed probabilities) and cross-attention (padding mask,
//    dropout), with and without biases: the gradients of L = sum(out * r) with respect to x,
//    the memory, every weight and bias, and the relative table, against central finite
//    differences; parameter gradients and d memory accumulate (+=), d x is written (=).
//  - Each FD check can fail: the same backward run with another dropout site, or without the
//    rotary / relative-bias term, gives gradients far from the finite differences.
//  - The masks, positions and dropout change the output (a spec that was ignored would not).
//  - The unfused op and flash agree (outputs and gradients) on causal self-attention with
//    document masks and dropout (they number the dropout elements alike).
//  - Tensor parallelism over 2 ranks, with dropout and ALiBi (both numbered by model head): the
//    ranks' partial outputs and input gradients sum to the one-rank values.
//  - The saved-activation plan: names and shapes.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/blocks/attention.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

constexpr int64_t kB = 2, kTq = 3, kTk = 4, kHeads = 2, kDh = 2, kD = 4, kDm = 3, kBuckets = 4;
constexpr AttentionDropoutSite kSite{4321, 5};

struct Case {
  std::string name;
  AttentionConfig c;
  bool bias = false;
  bool lengths = false;   // padding mask
  bool segments = false;  // document mask
};

AttentionConfig base(bool cross, bool causal) {
  AttentionConfig c;
  c.batch = kB;
  c.q_len = kTq;
  c.kv_len = cross ? kTk : kTq;
  c.heads = kHeads;
  c.head_dim = kDh;
  c.cross = cross;
  c.causal = causal;
  c.scale = 0.7f;
  return c;
}

Case with(std::string name, AttentionConfig c, bool bias = false, bool lengths = false,
          bool segments = false) {
  return {std::move(name), c, bias, lengths, segments};
}

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back(with("flash causal", base(false, true)));
  v.push_back(with("flash causal bias", base(false, true), true));
  v.push_back(with("flash bidirectional padding", base(false, false), true, true));
  v.push_back(with("flash causal documents", base(false, true), false, false, true));
  AttentionConfig c = base(false, true);
  c.position = AttentionPosition::kRotary;
  c.rotary_dim = kDh;
  c.rotary_base = 100.0f;
  v.push_back(with("flash rotary", c, true));
  c = base(false, true);
  c.position = AttentionPosition::kAlibi;
  v.push_back(with("flash alibi", c));
  c = base(false, false);
  c.position = AttentionPosition::kRelativeBuckets;
  v.push_back(with("flash relative buckets padding", c, false, true));
  c = base(false, true);
  c.dropout = 0.3f;
  v.push_back(with("flash dropout documents", c, true, false, true));
  c = base(false, true);
  c.flash = false;
  v.push_back(with("unfused documents", c, true, false, true));
  c.dropout = 0.3f;
  v.push_back(with("unfused dropout", c, false, false, true));
  c.recompute_probs = true;
  v.push_back(with("unfused dropout recompute", c, true, false, true));
  // Grouped-query (multi-query here: kv_heads 1 of 2), with rotary, dropout and documents.
  c = base(false, true);
  c.kv_heads = 1;
  v.push_back(with("flash multi-query", c, true));
  c.position = AttentionPosition::kRotary;
  c.rotary_dim = kDh;
  c.rotary_base = 100.0f;
  c.dropout = 0.3f;
  v.push_back(with("flash multi-query rotary dropout documents", c, true, false, true));
  v.push_back(with("cross", base(true, false)));
  c = base(true, false);
  c.dropout = 0.3f;
  v.push_back(with("cross dropout padding bias", c, true, true));
  return v;
}

std::vector<double> random(int64_t n, uint64_t seed) {
  const std::vector<float> v = testing::random_uniform(n, seed, -1.0f, 1.0f);
  return {v.begin(), v.end()};
}

// The block's differentiable inputs, flattened in this order (empty where unused).
struct Inputs {
  std::vector<double> x, memory, qkv_w, qkv_b, kv_w, kv_b, out_w, out_b;

  std::vector<std::vector<double>*> parts() {
    return {&x, &memory, &qkv_w, &qkv_b, &kv_w, &kv_b, &out_w, &out_b};
  }
  std::vector<double> flat() const {
    std::vector<double> v;
    for (const std::vector<double>* p : const_cast<Inputs*>(this)->parts()) {
      v.insert(v.end(), p->begin(), p->end());
    }
    return v;
  }
  // The same sizes as `like`, values from v.
  static Inputs split(const Inputs& like, const std::vector<double>& v) {
    Inputs in = like;
    size_t at = 0;
    for (std::vector<double>* p : in.parts()) {
      for (double& e : *p) e = v[at++];
    }
    return in;
  }
};

int64_t qkv_out(const AttentionConfig& c) { return c.cross ? c.inner() : c.qkv_cols(); }

Inputs random_inputs(const Case& k, uint64_t seed) {
  const AttentionConfig& c = k.c;
  const int64_t I = c.inner(), o = qkv_out(c);
  Inputs in;
  in.x = random(c.rows() * kD, seed);
  in.qkv_w = random(o * kD, seed + 1);
  in.out_w = random(kD * I, seed + 2);
  if (k.bias) {
    in.qkv_b = random(o, seed + 3);
    in.out_b = random(kD, seed + 4);
  }
  if (c.cross) {
    in.memory = random(c.kv_rows() * kDm, seed + 5);
    in.kv_w = random(2 * I * kDm, seed + 6);
    if (k.bias) in.kv_b = random(2 * I, seed + 7);
  }
  return in;
}

// The non-differentiable inputs (positions, masks) and the relative table (f32).
struct Fixed {
  std::vector<int32_t> positions, segments, lengths, buckets;
  std::vector<double> rel_table;
};

Fixed fixed_inputs() {
  Fixed f;
  f.positions = {3, 0, 7, 1, 2, 5};
  f.segments = {0, 0, 1, 4, 6, 6};
  f.lengths = {2, 1};
  f.buckets = {1, 3, 0, 2, 3, 1};  // [Tq + Tk - 1] for both shapes used
  const std::vector<float> t = testing::random_uniform(kBuckets * kHeads, 77, -1.0f, 1.0f);
  f.rel_table = {t.begin(), t.end()};
  return f;
}

TensorView maybe(TensorPool& pool, const std::vector<double>& v, std::vector<int64_t> shape) {
  return v.empty() ? TensorView{} : pool.from_f64(v, std::move(shape));
}

// The block's tensors (f64) for one run.
struct Block {
  TensorView x, memory, out, dx, dmemory, d_rel_table;
  AttentionWeights w, g;
  AttentionActs acts;
  AttentionInputs in;
  AttentionScratch scratch;
};

// Gradients (and d memory, d rel_table) start at g0 to see them accumulate.
Block make_block(TensorPool& pool, const Case& k, const Inputs& in, const Fixed& f,
                 const std::vector<double>& rel_table, double g0 = 0.0) {
  const AttentionConfig& c = k.c;
  const int64_t I = c.inner(), o = qkv_out(c);
  Block b;
  b.x = pool.from_f64(in.x, {c.rows(), kD});
  b.memory = maybe(pool, in.memory, {c.kv_rows(), kDm});
  b.w = {pool.from_f64(in.qkv_w, {o, kD}),   maybe(pool, in.qkv_b, {o}),
         maybe(pool, in.kv_w, {2 * I, kDm}), maybe(pool, in.kv_b, {2 * I}),
         pool.from_f64(in.out_w, {kD, I}),   maybe(pool, in.out_b, {kD})};
  auto filled = [&](const TensorView& like) {
    if (like.empty()) return TensorView{};
    std::vector<int64_t> shape(like.shape, like.shape + like.ndim);
    return pool.from_f64(std::vector<double>(static_cast<size_t>(like.numel()), g0), shape);
  };
  b.g = {filled(b.w.qkv_w), filled(b.w.qkv_b), filled(b.w.kv_w),
         filled(b.w.kv_b),  filled(b.w.out_w), filled(b.w.out_b)};
  b.dmemory = filled(b.memory);
  b.acts = attention_saved_acts(c, DType::kF64, "",
                                [&](const std::string&, DType dt, const std::vector<int64_t>& s) {
                                  return pool.empty(dt, s);
                                });
  b.out = pool.empty(DType::kF64, {c.rows(), kD});
  b.dx = pool.empty(DType::kF64, {c.rows(), kD});
  b.scratch.dqkv = pool.empty(DType::kF64, {c.rows(), o});
  if (c.cross) b.scratch.dkv = pool.empty(DType::kF64, {c.kv_rows(), 2 * I});
  b.scratch.datt = pool.empty(DType::kF64, {c.rows(), I});
  if (c.position == AttentionPosition::kRotary) b.in.positions = pool.from_i32(f.positions, {6});
  if (k.segments) b.in.masks.seg_q = b.in.masks.seg_k = pool.from_i32(f.segments, {6});
  if (k.lengths) b.in.masks.kv_lengths = pool.from_i32(f.lengths, {kB});
  if (c.position == AttentionPosition::kRelativeBuckets) {
    const int64_t n = c.q_len + c.kv_len - 1;
    b.in.masks.rel_buckets = pool.from_i32({f.buckets.begin(), f.buckets.begin() + n}, {n});
    std::vector<float> t(rel_table.begin(), rel_table.end());
    b.in.masks.rel_table = pool.from(t, DType::kF32, {kBuckets, kHeads});
    b.d_rel_table = pool.from(std::vector<float>(t.size(), static_cast<float>(g0)), DType::kF32,
                              {kBuckets, kHeads});
  }
  return b;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> minus(std::vector<double> v, double c) {
  for (double& e : v) e -= c;
  return v;
}

std::vector<double> host(const TensorView& v) {
  return v.empty() ? std::vector<double>{} : testing::to_host_f64(v);
}

void forward(const Case& k, Block& b, bool train, TestStream& s,
             AttentionDropoutSite site = kSite) {
  attention_forward(k.c, b.out, b.acts, b.x, b.memory, b.w, b.in, train, site, {}, s);
}

void backward(const AttentionConfig& c, Block& b, const TensorView& dout, TestStream& s,
              AttentionDropoutSite site = kSite) {
  attention_backward(c, b.dx, b.dmemory, b.g, b.d_rel_table, dout, b.x, b.memory, b.acts, b.w, b.in,
                     site, b.scratch, {}, s);
}

// Analytic gradients of L = sum(out * r), flattened as Inputs, minus their start value g0.
std::vector<double> analytic(const Block& b, double g0) {
  Inputs got;
  got.x = host(b.dx);
  got.memory = minus(host(b.dmemory), g0);
  got.qkv_w = minus(host(b.g.qkv_w), g0);
  got.qkv_b = minus(host(b.g.qkv_b), g0);
  got.kv_w = minus(host(b.g.kv_w), g0);
  got.kv_b = minus(host(b.g.kv_b), g0);
  got.out_w = minus(host(b.g.out_w), g0);
  got.out_b = minus(host(b.g.out_b), g0);
  return got.flat();
}

double norm2(const std::vector<double>& v) { return dot(v, v); }

TEST(AttentionBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const Fixed f = fixed_inputs();
  const double g0 = 0.5;
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const AttentionConfig& c = k.c;
    const Inputs in = random_inputs(k, 7);
    const std::vector<double> r = random(c.rows() * kD, 99);  // L = sum(out * r)
    auto loss = [&](const std::vector<double>& flat) {
      Block b = make_block(pool, k, Inputs::split(in, flat), f, f.rel_table);
      forward(k, b, /*train=*/true, stream);
      return dot(testing::to_host_f64(b.out), r);
    };
    Block b = make_block(pool, k, in, f, f.rel_table, g0);
    forward(k, b, true, stream);
    const TensorView dout = pool.from_f64(r, {c.rows(), kD});
    backward(c, b, dout, stream);
    const std::vector<double> got = analytic(b, g0);
    const std::vector<double> num = testing::numeric_gradient(loss, in.flat());
    EXPECT_GT(norm2(got), 1e-3);
    EXPECT_TRUE(testing::tensors_near(got, num, Tol{1e-7, 1e-6}));
    if (c.position == AttentionPosition::kRelativeBuckets) {
      // The table is f32: a step of 2^-10 moves it exactly.
      auto table_loss = [&](const std::vector<double>& t) {
        Block tb = make_block(pool, k, in, f, t);
        forward(k, tb, true, stream);
        return dot(testing::to_host_f64(tb.out), r);
      };
      const std::vector<double> num_t =
          testing::numeric_gradient(table_loss, f.rel_table, 1.0 / 1024);
      const std::vector<double> got_t = minus(host(b.d_rel_table), g0);
      EXPECT_GT(norm2(got_t), 1e-3);
      EXPECT_TRUE(testing::tensors_near(got_t, num_t, Tol{1e-5, 1e-4}));
    }
    // The check can fail: a backward that drops the dropout mask, the rotation or the relative
    // bias (its config without them) is far from the finite differences.
    AttentionConfig broken = c;
    AttentionDropoutSite site = kSite;
    if (c.dropout > 0.0f) {
      site.offset += 1000;
    } else if (c.position != AttentionPosition::kNone) {
      broken.position = AttentionPosition::kNone;
    } else {
      continue;
    }
    Block bb = make_block(pool, k, in, f, f.rel_table, g0);
    forward(k, bb, true, stream);
    if (broken.position != AttentionPosition::kRelativeBuckets) bb.d_rel_table = {};
    backward(broken, bb, dout, stream, site);
    EXPECT_FALSE(testing::tensors_near(analytic(bb, g0), num, Tol{1e-4, 1e-3}));
  }
}

// Multi-query (kv_heads 1 of 2) in Megatron's grouped row order [q0, q1, k, v] against the
// plain block with the k and v rows copied to both heads ([q0, q1 | k, k | v, v]): equal out and
// dx; the grouped d W_k, d W_v are the sums of the copies' gradients. Rotary, causal, dropout.
TEST(AttentionBlock, GroupedQueryEqualsHeadsWithCopiedKeysAndValues) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const Fixed f = fixed_inputs();
  AttentionConfig c = base(false, true);
  c.position = AttentionPosition::kRotary, c.rotary_dim = kDh, c.dropout = 0.3f;
  AttentionConfig gc = c;
  gc.kv_heads = 1;
  const Case mha = with("mha", c, true), gqa = with("gqa", gc, true);
  const Inputs gin = random_inputs(gqa, 41);
  Inputs min = gin;
  auto rows = [](const std::vector<double>& v, int64_t w, std::vector<int64_t> order) {
    std::vector<double> out;
    for (int64_t r : order) out.insert(out.end(), v.begin() + r * w, v.begin() + (r + 1) * w);
    return out;
  };
  // Grouped rows (head_dim each): q0 q1 k v = 0 1 2 3; expanded: q0 q1 k k v v.
  std::vector<int64_t> order;
  for (int64_t blk : {0, 1, 2, 2, 3, 3}) {
    for (int64_t d = 0; d < kDh; ++d) order.push_back(blk * kDh + d);
  }
  min.qkv_w = rows(gin.qkv_w, kD, order);
  min.qkv_b = rows(gin.qkv_b, 1, order);
  const TensorView dout = pool.from_f64(random(c.rows() * kD, 42), {c.rows(), kD});
  Block gb = make_block(pool, gqa, gin, f, f.rel_table),
        mb = make_block(pool, mha, min, f, f.rel_table);
  forward(gqa, gb, true, stream);
  forward(mha, mb, true, stream);
  backward(gc, gb, dout, stream);
  backward(c, mb, dout, stream);
  const Tol tol{1e-12, 1e-10};
  EXPECT_TRUE(testing::tensors_near(host(gb.out), host(mb.out), tol));
  EXPECT_TRUE(testing::tensors_near(host(gb.dx), host(mb.dx), tol));
  const std::vector<double> mg = host(mb.g.qkv_w);
  std::vector<double> want(host(gb.g.qkv_w).size(), 0.0);
  for (size_t i = 0; i < order.size(); ++i) {
    for (int64_t col = 0; col < kD; ++col) {
      want[order[i] * kD + col] += mg[i * kD + col];
    }
  }
  EXPECT_TRUE(testing::tensors_near(host(gb.g.qkv_w), want, tol));
}

TEST(AttentionBlock, SpecsChangeTheOutput) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const Fixed f = fixed_inputs();
  const Case plain = with("plain", base(false, false));
  const Inputs in = random_inputs(plain, 3);
  auto run = [&](const Case& k, bool train) {
    Block b = make_block(pool, k, in, f, f.rel_table);
    forward(k, b, train, stream);
    return testing::to_host_f64(b.out);
  };
  const std::vector<double> ref = run(plain, true);
  AttentionConfig c = base(false, true);
  EXPECT_NE(run(with("causal", c), true), ref);
  EXPECT_NE(run(with("padding", base(false, false), false, true), true), ref);
  EXPECT_NE(run(with("documents", base(false, false), false, false, true), true), ref);
  for (AttentionPosition p : {AttentionPosition::kRotary, AttentionPosition::kAlibi,
                              AttentionPosition::kRelativeBuckets}) {
    c = base(false, false);
    c.position = p;
    c.rotary_dim = kDh;
    EXPECT_NE(run(with("position", c), true), ref) << static_cast<int>(p);
  }
  c = base(false, false);
  c.dropout = 0.5f;
  EXPECT_EQ(run(with("dropout eval", c), false), ref);
  EXPECT_NE(run(with("dropout train", c), true), ref);
}

TEST(AttentionBlock, UnfusedMatchesFlash) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const Fixed f = fixed_inputs();
  AttentionConfig c = base(false, true);
  c.dropout = 0.4f;
  const Case flash = with("flash", c, true, false, true);
  c.flash = false;
  const Case unfused = with("unfused", c, true, false, true);
  const Inputs in = random_inputs(flash, 21);
  const TensorView dout = pool.from_f64(random(c.rows() * kD, 22), {c.rows(), kD});
  Block a = make_block(pool, flash, in, f, f.rel_table);
  Block b = make_block(pool, unfused, in, f, f.rel_table);
  forward(flash, a, true, stream);
  forward(unfused, b, true, stream);
  backward(flash.c, a, dout, stream);
  backward(unfused.c, b, dout, stream);
  const Tol tol{1e-12, 1e-10};
  EXPECT_TRUE(testing::tensors_near(host(b.out), host(a.out), tol));
  EXPECT_TRUE(testing::tensors_near(analytic(b, 0.0), analytic(a, 0.0), tol));
}

// Rows [begin, begin + n) or columns [begin, begin + n) of a row-major matrix.
std::vector<double> rows_of(const std::vector<double>& m, int64_t cols, int64_t begin, int64_t n) {
  if (m.empty()) return {};
  return {m.begin() + begin * cols, m.begin() + (begin + n) * cols};
}

std::vector<double> cols_of(const std::vector<double>& m, int64_t cols, int64_t begin, int64_t n) {
  std::vector<double> v;
  for (size_t r = 0; r < m.size() / static_cast<size_t>(cols); ++r) {
    const auto row = m.begin() + static_cast<int64_t>(r) * cols;
    v.insert(v.end(), row + begin, row + begin + n);
  }
  return v;
}

// Rank k's rows of a fused column-parallel weight of `parts` blocks of heads * Dh rows each.
std::vector<double> head_rows(const std::vector<double>& m, int64_t cols, int64_t parts, int64_t k,
                              int64_t local) {
  std::vector<double> v;
  for (int64_t p = 0; p < parts; ++p) {
    const std::vector<double> r = rows_of(m, cols, p * kHeads * kDh + k * local, local);
    v.insert(v.end(), r.begin(), r.end());
  }
  return v;
}

void add(std::vector<double>& into, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) into[i] += v[i];
}

TEST(AttentionBlock, TensorParallelRanksSumToOneRank) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const Fixed f = fixed_inputs();
  const Tol tol{1e-12, 1e-10};
  for (bool cross : {false, true}) {
    AttentionConfig c = base(cross, !cross);
    c.dropout = 0.4f;
    if (!cross) c.position = AttentionPosition::kAlibi;
    const Case one = with(cross ? "cross" : "self alibi", c, true, cross);
    SCOPED_TRACE(one.name);
    const Inputs in = random_inputs(one, 31);
    const TensorView dout = pool.from_f64(random(c.rows() * kD, 32), {c.rows(), kD});
    Block b = make_block(pool, one, in, f, f.rel_table);
    forward(one, b, true, stream);
    backward(c, b, dout, stream);
    std::vector<double> out(host(b.out).size(), 0.0), dx = out, dmem(in.memory.size(), 0.0);
    const int64_t tp = 2, local = kHeads * kDh / tp, parts = cross ? 1 : 3;
    for (int64_t k = 0; k < tp; ++k) {
      Case rank = one;
      rank.c.tp = tp;
      rank.c.tp_rank = k;
      Inputs part = in;
      part.qkv_w = head_rows(in.qkv_w, kD, parts, k, local);
      part.qkv_b = head_rows(in.qkv_b, 1, parts, k, local);
      part.kv_w = head_rows(in.kv_w, kDm, 2, k, local);
      part.kv_b = head_rows(in.kv_b, 1, 2, k, local);
      part.out_w = cols_of(in.out_w, kHeads * kDh, k * local, local);
      Block rb = make_block(pool, rank, part, f, f.rel_table);
      forward(rank, rb, true, stream);
      backward(rank.c, rb, dout, stream);
      add(out, host(rb.out));
      add(dx, host(rb.dx));
      add(dmem, host(rb.dmemory));
      EXPECT_TRUE(testing::tensors_near(host(rb.g.qkv_w),
                                        head_rows(host(b.g.qkv_w), kD, parts, k, local), tol));
      EXPECT_TRUE(testing::tensors_near(
          host(rb.g.out_w), cols_of(host(b.g.out_w), kHeads * kDh, k * local, local), tol));
    }
    EXPECT_TRUE(testing::tensors_near(out, host(b.out), tol));
    EXPECT_TRUE(testing::tensors_near(dx, host(b.dx), tol));
    if (cross) {
      EXPECT_TRUE(testing::tensors_near(dmem, host(b.dmemory), tol));
    }
  }
}

TEST(AttentionBlock, SavedActivationPlan) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DType> dtypes;
  auto take = [&](const std::string& n, DType dt, const std::vector<int64_t>& shape) {
    names.push_back(n);
    shapes.push_back(shape);
    dtypes.push_back(dt);
    return TensorView{};
  };
  AttentionConfig c = base(false, true);
  c.tp = 2;
  attention_saved_acts(c, DType::kBF16, "L0.", take);
  c.flash = false;
  attention_saved_acts(c, DType::kBF16, "u.", take);
  attention_saved_acts(base(true, false), DType::kBF16, "x.", take);
  EXPECT_EQ(names, (std::vector<std::string>{"L0.qkv", "L0.attn.lse", "L0.att", "u.qkv", "u.probs",
                                             "u.att", "x.qkv", "x.kv", "x.attn.lse", "x.att"}));
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{6, 6},
                                                       {2, 1, 3},
                                                       {6, 2},
                                                       {6, 6},
                                                       {2, 1, 3, 3},
                                                       {6, 2},
                                                       {6, 4},
                                                       {8, 8},
                                                       {2, 2, 3},
                                                       {6, 4}}));
  EXPECT_EQ(dtypes[1], DType::kF32);
  EXPECT_EQ(dtypes[4], DType::kBF16);
}

}  // namespace
}  // namespace anvil::model::blocks
