// f16 (fp16 training) and f32 in every op of the training step, one table of cases:
//  - CPU (CI): each op's CPU twin on f16 (and bf16) storage equals the twin on f32 storage of
//    the same (exactly representable) inputs, to the rounding of the outputs: the CPU fp16
//    (and bf16) training path.
//  - CUDA (skips without a GPU): the CUDA op in f16 against the CPU twin in f16 (the unfused
//    attention's twin takes f32 only: against it, looser), and the CUDA op in f32 against the
//    twin in f32: [train] precision fp16 and fp32 on the GPU.
// Outputs start poisoned with NaN (TensorPool::empty) and a NaN never compares near, so an
// element an op fails to write fails the test. Inputs are fixed seeded uniform values rounded
// to bf16 and f16 first, so all runs of a case see the same numbers.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "ops/activation.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/axpy.h"
#include "ops/cast.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/flash_attention.h"
#include "ops/gelu.h"
#include "ops/gemm.h"
#include "ops/glu.h"
#include "ops/layernorm.h"
#include "ops/rmsnorm.h"
#include "ops/rotary.h"
#include "ops/vocab_parallel_cross_entropy.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

// Seeded values in [lo, hi) rounded to bf16, then to f16: exactly representable in every float
// dtype (bf16's 8 significant bits fit f16's 11 down to 2^-17; below that the values are too
// small to matter next to the tolerances).
std::vector<float> f16_values(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v = testing::random_uniform(n, seed, lo, hi);
  for (float& x : v) x = engine::f16_to_f32(engine::f32_to_f16(engine::round_to_bf16(x)));
  return v;
}

// One run of an op: inputs made in `pool` with activations of dtype `act`, the op on `s`,
// every output copied to the host as f32 (poisoned before the op).
struct Env {
  TensorPool& pool;
  engine::Stream& s;
  DType act;
  TensorView in(int64_t n, uint64_t seed, std::vector<int64_t> shape, float lo = -1.0f,
                float hi = 1.0f) {
    return pool.from(f16_values(n, seed, lo, hi), act, std::move(shape));
  }
  TensorView f32(int64_t n, uint64_t seed, std::vector<int64_t> shape) {
    return pool.from(f16_values(n, seed), DType::kF32, std::move(shape));
  }
  TensorView out(std::vector<int64_t> shape, DType t) { return pool.empty(t, std::move(shape)); }
  TensorView out(std::vector<int64_t> shape) { return out(std::move(shape), act); }
};
using Outputs = std::vector<std::vector<float>>;
using RunFn = std::function<Outputs(Env&)>;

struct OpCase {
  std::string name;
  RunFn run;
  bool cpu_f16 = true;  // the CPU twin takes f16 (else the GPU f16 run is checked against f32)
  double scale = 1.0;   // typical output magnitude, for the absolute tolerance
  bool gpu_f16 = true;  // the CUDA op takes f16 (flash attention: bf16 only; fp16 runs unfused)
};

Outputs host(std::initializer_list<TensorView> views) {
  Outputs o;
  for (const TensorView& v : views) o.push_back(testing::to_host(v));
  return o;
}

constexpr int64_t kRows = 37, kCols = 200;  // rows * cols not a multiple of any vector width

std::vector<OpCase> cases() {
  std::vector<OpCase> c;
  const int64_t n = kRows * kCols;
  c.push_back({"gelu", [](Env& e) {
                 TensorView x = e.in(n, 1, {kRows, kCols}, -3, 3), dy = e.in(n, 2, {kRows, kCols});
                 TensorView y = e.out({kRows, kCols}), dx = e.out({kRows, kCols});
                 gelu_forward(y, x, e.s);
                 gelu_backward(dx, dy, x, e.s);
                 return host({y, dx});
               }});
  c.push_back({"activation_gelu_erf_relu", [](Env& e) {
                 TensorView x = e.in(n, 3, {kRows, kCols}, -3, 3), dy = e.in(n, 4, {kRows, kCols});
                 Outputs o;
                 for (Activation a : {Activation::kGeluErf, Activation::kRelu}) {
                   TensorView y = e.out({kRows, kCols}), dx = e.out({kRows, kCols});
                   activation_forward(a, y, x, e.s);
                   activation_backward(a, dx, dy, x, e.s);
                   for (auto& v : host({y, dx})) o.push_back(v);
                 }
                 return o;
               }});
  c.push_back({"glu", [](Env& e) {
                 TensorView h = e.in(n, 5, {kRows, kCols}, -2, 2);
                 TensorView dy = e.in(n / 2, 6, {kRows, kCols / 2});
                 Outputs o;
                 for (GluKind k : {GluKind::kSwiglu, GluKind::kGeglu}) {
                   TensorView y = e.out({kRows, kCols / 2}), dh = e.out({kRows, kCols});
                   glu_forward(k, y, h, e.s);
                   glu_backward(k, dh, dy, h, e.s);
                   for (auto& v : host({y, dh})) o.push_back(v);
                 }
                 return o;
               }});
  c.push_back({"dropout", [](Env& e) {
                 const DropoutArgs a{0.25f, 42, 7};
                 TensorView x = e.in(n, 7, {kRows, kCols}), dy = e.in(n, 8, {kRows, kCols});
                 TensorView y = e.out({kRows, kCols}), dx = e.out({kRows, kCols});
                 dropout_forward(a, y, x, e.s);
                 dropout_backward(a, dx, dy, e.s);
                 return host({y, dx});
               }});
  c.push_back({"axpy", [](Env& e) {
                 TensorView y = e.in(n, 9, {n});
                 axpy(0.375f, y, e.in(n, 10, {n}), e.s);
                 return host({y});
               }});
  c.push_back({"cast_f32_to_act_and_back", [](Env& e) {
                 TensorView x = e.f32(n, 11, {n}), y = e.out({n}), z = e.out({n}, DType::kF32);
                 cast(y, x, e.s);
                 cast(z, y, e.s);
                 return host({y, z});
               }});
  c.push_back({"layernorm", [](Env& e) {
                 const LayerNormArgs a{kRows, kCols, 1e-5f};
                 TensorView x = e.in(n, 12, {kRows, kCols}, -1, 2), b = e.in(n, 13, {kRows, kCols});
                 TensorView g = e.in(kCols, 14, {kCols}, 0.5f, 1.5f), be = e.in(kCols, 15, {kCols});
                 TensorView y = e.out({kRows, kCols}), sum = e.out({kRows, kCols});
                 TensorView mean = e.out({kRows}, DType::kF32), rstd = e.out({kRows}, DType::kF32);
                 residual_layernorm_forward(a, sum, y, mean, rstd, x, b, g, be, e.s);
                 // The backward from x itself (not the rounded sum): the same inputs either way.
                 TensorView y1 = e.out({kRows, kCols});
                 TensorView mean1 = e.out({kRows}, DType::kF32),
                            rstd1 = e.out({kRows}, DType::kF32);
                 layernorm_forward(a, y1, mean1, rstd1, x, g, be, e.s);
                 TensorView dy = e.in(n, 16, {kRows, kCols}), dx = e.out({kRows, kCols});
                 TensorView dg = e.f32(kCols, 17, {kCols}), db = e.f32(kCols, 18, {kCols});
                 layernorm_backward(a, Accumulate::kOverwrite, dx, dg, db, dy, x, g, mean1, rstd1,
                                    e.pool.workspace(layernorm_backward_workspace_bytes(a)), e.s);
                 return host({sum, y, mean, rstd, y1, dx, dg, db});
               }});
  c.push_back({"rmsnorm", [](Env& e) {
                 const RmsNormArgs a{kRows, kCols, 1e-6f};
                 TensorView x = e.in(n, 19, {kRows, kCols}), b = e.in(n, 20, {kRows, kCols});
                 TensorView g = e.in(kCols, 21, {kCols}, 0.5f, 1.5f);
                 TensorView y = e.out({kRows, kCols}), sum = e.out({kRows, kCols});
                 TensorView rstd = e.out({kRows}, DType::kF32);
                 residual_rmsnorm_forward(a, sum, y, rstd, x, b, g, e.s);
                 TensorView y1 = e.out({kRows, kCols}), rstd1 = e.out({kRows}, DType::kF32);
                 rmsnorm_forward(a, y1, rstd1, x, g, e.s);
                 TensorView dy = e.in(n, 22, {kRows, kCols}), dx = e.out({kRows, kCols});
                 TensorView dg = e.f32(kCols, 23, {kCols});
                 rmsnorm_backward(a, Accumulate::kOverwrite, dx, dg, dy, x, g, rstd1,
                                  e.pool.workspace(rmsnorm_backward_workspace_bytes(a)), e.s);
                 return host({sum, y, rstd, y1, dx, dg});
               }});
  c.push_back({"rotary", [](Env& e) {
                 const RotaryArgs a{kRows, 2, 64, 32, 10000.0f};
                 std::vector<int32_t> pos(kRows);
                 for (int64_t i = 0; i < kRows; ++i) pos[i] = static_cast<int32_t>((i * 7) % 50);
                 TensorView p = e.pool.from_i32(pos, {kRows});
                 TensorView x = e.in(kRows * 128, 24, {kRows, 128});
                 TensorView dx = e.in(kRows * 128, 25, {kRows, 128});
                 rotary_forward(a, x, p, e.s);
                 rotary_backward(a, dx, p, e.s);
                 return host({x, dx});
               }});
  c.push_back({"embedding", [](Env& e) {
                 const int64_t vocab = 50, d = 96, pos_rows = 40;
                 const EmbeddingArgs a{kRows, d, vocab, pos_rows, 0};
                 const std::vector<int32_t> tok = testing::random_ints(kRows, 26, 0, vocab);
                 const std::vector<int32_t> pos = testing::random_ints(kRows, 27, 0, pos_rows);
                 TensorView t = e.pool.from_i32(tok, {kRows}), p = e.pool.from_i32(pos, {kRows});
                 TensorView wte = e.in(vocab * d, 28, {vocab, d}),
                            wpe = e.in(pos_rows * d, 29, {pos_rows, d});
                 TensorView out = e.out({kRows, d});
                 embedding_forward(a, out, t, p, wte, wpe, e.s);
                 TensorView dout = e.in(kRows * d, 30, {kRows, d});
                 TensorView dwte = e.f32(vocab * d, 31, {vocab, d});
                 TensorView dwpe = e.f32(pos_rows * d, 32, {pos_rows, d});
                 embedding_backward(a, dwte, dwpe, dout, t, p, e.s);
                 return host({out, dwte, dwpe});
               }});
  c.push_back({"cross_entropy_loss_scaled",
               [](Env& e) {
                 // grad_scale as fp16 training uses it: S / (G * T) with S = 2^12.
                 const CrossEntropyArgs a{kRows, 190, kCols, 4096.0f / 64.0f};
                 std::vector<int32_t> tg = testing::random_ints(kRows, 33, 0, 190);
                 tg[3] = -1;  // an ignored row
                 TensorView x = e.in(n, 34, {kRows, kCols}, -4, 4);
                 TensorView losses = e.out({kRows}, DType::kF32), dx = e.out({kRows, kCols});
                 softmax_cross_entropy(a, losses, dx, x, e.pool.from_i32(tg, {kRows}), e.s);
                 return host({losses, dx});
               },
               true, 64.0});
  c.push_back({"vocab_shard_cross_entropy", [](Env& e) {
                 const VocabShardArgs a{kRows, 150, 100, 100, 2.0f};
                 const std::vector<int32_t> tg = testing::random_ints(kRows, 35, 0, 150);
                 TensorView t = e.pool.from_i32(tg, {kRows});
                 TensorView x = e.in(kRows * 100, 36, {kRows, 100}, -4, 4);
                 TensorView mx = e.out({kRows}, DType::kF32), se = e.out({kRows}, DType::kF32);
                 TensorView tl = e.out({kRows}, DType::kF32), loss = e.out({kRows}, DType::kF32);
                 TensorView dx = e.out({kRows, 100});
                 vocab_shard_max(a, mx, x, e.s);
                 vocab_shard_sum_exp(a, se, tl, x, mx, t, e.s);
                 vocab_shard_cross_entropy(a, loss, dx, x, mx, se, tl, t, e.s);
                 return host({mx, se, tl, loss, dx});
               }});
  c.push_back({"gemm_bias_gelu_dgelu_and_weight_grad",
               [](Env& e) {
                 const int64_t m = 67, k = 96, nn = 72;
                 TensorView x = e.in(m * k, 37, {m, k}), w = e.in(nn * k, 38, {nn, k});
                 TensorView bias = e.in(nn, 39, {nn});
                 GemmArgs fwd{m, nn, k};
                 fwd.trans_b = true;
                 fwd.epilogue = Epilogue::kBiasGelu;
                 TensorView y = e.out({m, nn}), pre = e.out({m, nn});
                 gemm(fwd, y, x, w, bias, pre, e.s);
                 // kDGelu: D = (x W^T) * gelu'(pre), the MLP backward's epilogue.
                 GemmArgs dg{m, nn, k};
                 dg.trans_b = true;
                 dg.epilogue = Epilogue::kDGelu;
                 TensorView dh = e.out({m, nn});
                 gemm(dg, dh, x, w, {}, pre, e.s);
                 // Weight gradient in f32 with the bias gradient: dW[nn, k] = dy^T x, db = sum dy.
                 TensorView dy = e.in(m * nn, 40, {m, nn});
                 GemmArgs wg{nn, k, m};
                 wg.trans_a = true;
                 TensorView dw = e.out({nn, k}, DType::kF32);
                 TensorView db = e.f32(nn, 41, {nn});
                 gemm_bias_grad(wg, dw, db, dy, x, e.s);
                 // Accumulating (beta = 1) into the f32 gradient.
                 wg.beta = 1.0f;
                 gemm(wg, dw, dy, x, {}, {}, e.s);
                 return host({y, pre, dh, dw, db});
               },
               true, 8.0});
  c.push_back({"attention_unfused",
               [](Env& e) {
                 AttentionArgs a{2, 24, 3, 16, 0.25f};
                 a.dropout_p = 0.1f;
                 a.seed = 3;
                 const int64_t bt = 2 * 24, hd = 3 * 16;
                 TensorView qkv = e.in(bt * 3 * hd, 42, {bt, 3 * hd});
                 TensorView out = e.out({bt, hd}), probs = e.out({2 * 3 * 24, 24});
                 const engine::Workspace ws = e.pool.workspace(attention_workspace_bytes(a));
                 attention_forward(a, out, probs, qkv, {}, ws, e.s);
                 TensorView dout = e.in(bt * hd, 43, {bt, hd}), dqkv = e.out({bt, 3 * hd});
                 attention_backward(a, dqkv, dout, qkv, probs, {}, ws, e.s);
                 return host({out, probs, dqkv});
               },
               false});
  c.push_back({"flash_attention_cpu",  // what CPU fp16 training uses
               [](Env& e) {
                 FlashAttentionArgs a;
                 a.batch = 2;
                 a.q_len = a.kv_len = 24;
                 a.heads = 3;
                 a.head_dim = 16;
                 a.scale = 0.25f;
                 a.dropout_p = 0.1f;
                 a.seed = 5;
                 const int64_t bt = 48, hd = 48;
                 TensorView q = e.in(bt * hd, 48, {bt, hd}), k = e.in(bt * hd, 49, {bt, hd});
                 TensorView v = e.in(bt * hd, 50, {bt, hd});
                 TensorView out = e.out({bt, hd}), lse = e.out({2, 3, 24}, DType::kF32);
                 flash_attention_forward(a, out, lse, q, k, v, {}, e.s);
                 TensorView dout = e.in(bt * hd, 51, {bt, hd});
                 TensorView dq = e.out({bt, hd}), dk = e.out({bt, hd}), dv = e.out({bt, hd});
                 flash_attention_backward(a, dq, dk, dv, {}, dout, q, k, v, out, lse, {},
                                          e.pool.workspace(flash_attention_workspace_bytes(a, 0)),
                                          e.s);
                 return host({out, lse, dq, dk, dv});
               },
               true, 1.0, false});
  c.push_back({"adamw_master_to_compute_copy", [](Env& e) {
                 AdamWArgs a;
                 a.lr = 1e-2f;
                 a.weight_decay = 0.1f;
                 a.step = 3;
                 a.grad_scale = 1.0f / 4096.0f;  // unscaling a 2^12 loss scale
                 const int64_t m = 1001;
                 TensorView w = e.f32(m, 44, {m}), mm = e.f32(m, 45, {m});
                 TensorView v = e.pool.from(f16_values(m, 46, 0.0f, 1.0f), DType::kF32, {m});
                 TensorView g = e.pool.from(f16_values(m, 47, -4096.0f, 4096.0f), DType::kF32, {m});
                 TensorView p = e.out({m});
                 adamw_update(a, w, mm, v, p, g, e.s);
                 return host({w, mm, v, p});
               }});
  return c;
}

// The CPU twin on f16 (and bf16: [train] precision bf16 on the CPU) storage vs on f32 storage:
// the outputs differ by the 16-bit rounding of the outputs only (f16: 2^-11 relative, bf16:
// 2^-8).
TEST(F16OpsCpu, TwinOn16BitStorageMatchesTheF32Twin) {
  for (DType half : {DType::kF16, DType::kBF16}) {
    const Tol tol = half == DType::kF16 ? Tol{1e-3, 2e-3, 1e-6} : Tol{8e-3, 1.6e-2, 1e-4};
    for (const OpCase& op : cases()) {
      if (!op.cpu_f16) continue;
      SCOPED_TRACE(op.name + (half == DType::kF16 ? " f16" : " bf16"));
      TestStream cs(Device::kCpu);
      TensorPool p16(Device::kCpu), p32(Device::kCpu);
      Env e16{p16, cs.get(), half}, e32{p32, cs.get(), DType::kF32};
      const Outputs a = op.run(e16), b = op.run(e32);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE("output " + std::to_string(i));
        EXPECT_TRUE(
            testing::tensors_near(a[i], b[i], Tol{tol.atol * op.scale, tol.rtol, tol.max_nmse}));
      }
    }
  }
}

TEST(F16OpsCpu, F16StorageIsReallyRounded) {
  // The f16 run must not be an f32 run in disguise: 1 + 2^-12 is not an f16 value.
  TestStream cs(Device::kCpu);
  TensorPool pool(Device::kCpu);
  TensorView y = pool.from({1.0f}, DType::kF16, {1});
  axpy(1.0f / 4096.0f, y, pool.from({1.0f}, DType::kF16, {1}), cs);
  EXPECT_EQ(testing::to_host(y)[0], 1.0f);
}

// CUDA in f16 against the twin in f16 (or f32), and CUDA in f32 against the twin in f32.
TEST(F16OpsGpu, CudaMatchesTheCpuTwinInF16AndF32) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (const OpCase& op : cases()) {
    for (DType act : {DType::kF16, DType::kF32}) {
      if (!op.gpu_f16) continue;  // flash attention: its own test, bf16
      SCOPED_TRACE(op.name + (act == DType::kF16 ? " f16" : " f32"));
      TestStream cs(Device::kCpu), gs(Device::kCuda);
      TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
      const DType ref_act = act == DType::kF16 && !op.cpu_f16 ? DType::kF32 : act;
      Env ge{gpool, gs.get(), act}, ce{cpool, cs.get(), ref_act};
      const Outputs got = op.run(ge);
      gs.get().synchronize();
      const Outputs want = op.run(ce);
      ASSERT_EQ(got.size(), want.size());
      // f16: one or two f16 ulps (the GPU rounds an f32 result, the twin a double one); the
      // unfused attention also rounds its scores and probabilities to f16 on the way.
      const Tol tol = act == DType::kF32 ? Tol{1e-5 * op.scale, 1e-4, 1e-9}
                      : op.cpu_f16       ? Tol{2e-3 * op.scale, 4e-3, 1e-6}
                                         : Tol{1e-2 * op.scale, 2e-2, 1e-5};
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("output " + std::to_string(i));
        EXPECT_TRUE(testing::tensors_near(got[i], want[i], tol));
      }
    }
  }
}

}  // namespace
}  // namespace anvil::ops
