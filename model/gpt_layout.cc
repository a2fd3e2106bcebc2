// GPT-2 parameter table, precision checks and the buffer layout shared by plan() and create().
#include "model/gpt_layout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "ops/attention.h"
#include "ops/grad_norm.h"
#include "ops/layernorm.h"

namespace anvil::model::gpt_detail {

namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;  // what cuBLASLt wants on Hopper

// The parameters of one flat buffer, in make_param_table's order.
Weights weights_of(const ParamTable& t, TensorView Param::*field, int64_t n_layers) {
  const std::vector<Param>& p = t.all();
  Weights w;
  size_t i = 0;
  w.wte = p[i++].*field;
  w.wpe = p[i++].*field;
  for (int64_t l = 0; l < n_layers; ++l) {
    LayerWeights lw;
    for (TensorView* v :
         {&lw.ln1_g, &lw.ln1_b, &lw.qkv_w, &lw.qkv_b, &lw.attn_proj_w, &lw.attn_proj_b, &lw.ln2_g,
          &lw.ln2_b, &lw.fc_w, &lw.fc_b, &lw.mlp_proj_w, &lw.mlp_proj_b}) {
      *v = p[i++].*field;
    }
    w.layers.push_back(lw);
  }
  w.lnf_g = p[i++].*field;
  w.lnf_b = p[i++].*field;
  return w;
}

}  // namespace

engine::Arena* Carver::arena(const std::string& category) {
  for (auto& [name, a] : *arenas_) {
    if (name == category) return &a;
  }
  return nullptr;
}

TensorView Carver::take(const std::string& category, const std::string& name, DType dtype,
                        const std::vector<int64_t>& shape) {
  if (planning()) {
    plan_->add(category, name, engine::arena_bytes(dtype, shape));
    TensorView v;
    v.dtype = dtype;
    v.ndim = static_cast<int>(shape.size());
    for (int d = 0; d < v.ndim; ++d) v.shape[d] = shape[d];
    return v;
  }
  engine::Arena* a = arena(category);
  if (a == nullptr) {
    if (status_.ok()) status_ = absl::InternalError(absl::StrCat("no arena for ", category));
    return {};
  }
  absl::StatusOr<TensorView> v = a->allocate(dtype, shape, name);
  if (!v.ok()) {
    if (status_.ok()) status_ = v.status();
    return {};
  }
  return *v;
}

engine::Workspace Carver::take_workspace(const std::string& category, const std::string& name,
                                         size_t bytes) {
  if (bytes == 0) return {};
  if (planning()) {
    plan_->add(category, name, engine::align_up(bytes));
    return {};
  }
  engine::Arena* a = arena(category);
  if (a == nullptr) {
    if (status_.ok()) status_ = absl::InternalError(absl::StrCat("no arena for ", category));
    return {};
  }
  absl::StatusOr<engine::Workspace> ws = a->allocate_workspace(bytes, name);
  if (!ws.ok()) {
    if (status_.ok()) status_ = ws.status();
    return {};
  }
  return *ws;
}

ParamTable make_param_table(const GptConfig& cfg) {
  const int64_t d = cfg.d_model, f = cfg.ffn();
  ParamTableBuilder b;
  // Embeddings and matrices take weight decay (Megatron: everything but biases and norms);
  // wte is vocab-parallel under TP, c_attn / c_fc column-parallel, the projections row-parallel.
  b.add("wte.weight", {cfg.padded(), d}, true, 0);
  b.add("wpe.weight", {cfg.max_seq_len, d}, true);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const std::string h = absl::StrCat("h.", l, ".");
    b.add(h + "ln_1.weight", {d}, false);
    b.add(h + "ln_1.bias", {d}, false);
    b.add(h + "attn.c_attn.weight", {3 * d, d}, true, 0);
    b.add(h + "attn.c_attn.bias", {3 * d}, false, 0);
    b.add(h + "attn.c_proj.weight", {d, d}, true, 1);
    b.add(h + "attn.c_proj.bias", {d}, false);
    b.add(h + "ln_2.weight", {d}, false);
    b.add(h + "ln_2.bias", {d}, false);
    b.add(h + "mlp.c_fc.weight", {f, d}, true, 0);
    b.add(h + "mlp.c_fc.bias", {f}, false, 0);
    b.add(h + "mlp.c_proj.weight", {d, f}, true, 1);
    b.add(h + "mlp.c_proj.bias", {d}, false);
  }
  b.add("ln_f.weight", {d}, false);
  b.add("ln_f.bias", {d}, false);
  return b.build();
}

DType stat_dtype(const GptPrecision& prec) {
  return prec.act == DType::kF64 ? DType::kF64 : DType::kF32;
}

absl::Status check_run(const GptConfig& cfg, const GptRunShape& shape, const GptPrecision& prec) {
  ANVIL_RETURN_IF_ERROR(cfg.validate());
  if (shape.micro_batch < 1 || shape.seq_len < 1 || shape.seq_len > cfg.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPT run shape: need micro_batch >= 1 and 1 <= seq_len <= max_seq_len (", cfg.max_seq_len,
        "), got micro_batch ", shape.micro_batch, ", seq_len ", shape.seq_len));
  }
  const std::string act(engine::dtype_name(prec.act)), grad(engine::dtype_name(prec.grad));
  if (prec.device == engine::Device::kCpu) {
    // CPU ops (OpenBLAS GEMM) take f32 or f64 with one dtype throughout.
    if (!((prec.act == DType::kF32 || prec.act == DType::kF64) && prec.grad == prec.act)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GPT precision on the CPU: act and grad must both be f32 or both f64, got act ", act,
          ", grad ", grad));
    }
  } else if (!((prec.act == DType::kBF16 || prec.act == DType::kF32) && prec.grad == DType::kF32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT precision on CUDA: act must be bf16 or f32 and grad f32, got act ", act,
                     ", grad ", grad));
  }
  return absl::OkStatus();
}

Buffers gpt_layout(const GptConfig& cfg, const GptRunShape& shape, const GptPrecision& prec,
                   Carver& carver) {
  const int64_t bt = shape.micro_batch * shape.seq_len, d = cfg.d_model, f = cfg.ffn();
  const int64_t T = shape.seq_len, H = cfg.n_heads;
  const DType act = prec.act, gdt = prec.grad, st = stat_dtype(prec);
  const bool cuda = prec.device == engine::Device::kCuda;
  Buffers b;
  b.table = make_param_table(cfg);
  const int64_t n = b.table.flat_numel();

  b.value = carver.take("params", "params (compute copy)", act, {n});
  b.master = act == gdt ? b.value : carver.take("master", "master weights", gdt, {n});
  b.grad = carver.take("grads", "gradients", gdt, {n});
  b.m = carver.take("optimizer", "adamw m", gdt, {n});
  b.v = carver.take("optimizer", "adamw v", gdt, {n});

  auto A = [&](const std::string& name, DType dt, const std::vector<int64_t>& s) {
    return carver.take("activations", name, dt, s);
  };
  b.tokens = A("tokens", DType::kI32, {bt});
  b.positions = A("positions", DType::kI32, {bt});
  b.targets = A("targets", DType::kI32, {bt});
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const std::string h = absl::StrCat("h.", l, ".");
    LayerActs a;
    a.x = A(h + "x", act, {bt, d});
    a.ln1 = A(h + "ln1", act, {bt, d});
    a.ln1_mean = A(h + "ln1.mean", st, {bt});
    a.ln1_rstd = A(h + "ln1.rstd", st, {bt});
    a.qkv = A(h + "qkv", act, {bt, 3 * d});
    a.probs = A(h + "probs", act, {shape.micro_batch, H, T, T});
    a.atty = A(h + "atty", act, {bt, d});
    a.h = A(h + "h", act, {bt, d});
    a.ln2 = A(h + "ln2", act, {bt, d});
    a.ln2_mean = A(h + "ln2.mean", st, {bt});
    a.ln2_rstd = A(h + "ln2.rstd", st, {bt});
    a.pre_gelu = A(h + "pre_gelu", act, {bt, f});
    a.gelu = A(h + "gelu", act, {bt, f});
    b.layers.push_back(a);
  }
  b.x_final = A("x_final", act, {bt, d});
  b.lnf = A("ln_f", act, {bt, d});
  b.lnf_mean = A("ln_f.mean", st, {bt});
  b.lnf_rstd = A("ln_f.rstd", st, {bt});
  b.logits = A("logits", act, {bt, cfg.padded()});
  b.losses = A("losses", st, {bt});
  b.proj = A("proj / dproj", act, {bt, d});
  b.dres = A("grad residual", act, {bt, d});
  b.dln = A("grad ln input", act, {bt, d});
  b.dbig = A("grad mlp hidden / qkv", act, {bt * std::max(f, 3 * d)});

  // One op scratch for attention, layernorm backward and the gradient norm: they never overlap.
  size_t op_bytes = 0;
  if (cuda) {
    ops::AttentionArgs aa{shape.micro_batch, T, H, cfg.head_dim(), 1.0f};
    op_bytes = std::max({ops::cuda::attention_workspace_bytes(aa, engine::dtype_size(act)),
                         ops::cuda::layernorm_backward_workspace_bytes({bt, d, cfg.ln_eps}),
                         ops::cuda::sum_squares_workspace_bytes(n)});
  }
  b.op_ws = carver.take_workspace("workspace", "op scratch", op_bytes);
  b.gemm_ws = carver.take_workspace("workspace", "cublaslt", cuda ? kGemmWorkspaceBytes : 0);
  b.norm_out = carver.take("workspace", "grad norm", gdt, {1});

  if (!carver.planning() && carver.status().ok()) {
    b.table.bind(b.value, b.master, b.grad, b.m, b.v);
    b.w = weights_of(b.table, &Param::value, cfg.n_layers);
    b.g = weights_of(b.table, &Param::grad, cfg.n_layers);
  }
  return b;
}

}  // namespace anvil::model::gpt_detail
