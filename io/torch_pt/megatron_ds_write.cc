// Whole fork-named tensors -> a Megatron-DeepSpeed checkpoint folder (write_megatron_ds in
// io/torch_pt/megatron_ds.h): the inverse of read_megatron_ds, file by file as the fork's
// DeepSpeed engine saves a GPTModelPipe under ZeRO-1 (and as scripts/make_megatron_ds_fixture.py
// writes it). Per stage pp and TP rank tp (mp = pp x tp_size + tp):
//   each tensor's TP piece: column-parallel (QKV, dense_h_to_4h, the vocab-parallel embedding)
//   rows chunk tp, row-parallel (attention dense, dense_4h_to_h weights) columns chunk tp, the
//   rest replicated;
//   group g's flat state = the pieces of its parameters back to back, zero-padded to a multiple
//   of 2 x dp, partition d = elements [d, d + 1) x padded / dp; the fp32 master partitions drop
//   the last one's padding (DeepSpeed's state_dict does), the Adam moments keep it.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "io/durable_file.h"
#include "io/torch_pt/megatron_ds.h"
#include "io/torch_pt/pt_file.h"

namespace anvil::io::torch_pt {
namespace {

// One parameter of a stage: its pipe-module name, fork name and whether it is a LayerNorm's.
struct StageParam {
  std::string pipe, fork;
  bool norm = false;
};

// The stage's parameters in the order of the pipe module's modules(): the tied embedding first,
// then the layers by spec index (3 + i), then the final LayerNorm (4 + L).
std::vector<StageParam> stage_params(int pp, int n_pp, int64_t layers) {
  std::vector<StageParam> out = {
      {"tied_modules.embed.word_embeddings.weight", "word_embeddings.weight", false}};
  if (pp == 0) {  // the embedding LayerNorm lives on the first stage only
    out.push_back(
        {"tied_modules.embed.word_embeddings.norm.weight", "word_embeddings.norm.weight", true});
    out.push_back(
        {"tied_modules.embed.word_embeddings.norm.bias", "word_embeddings.norm.bias", true});
  }
  const std::pair<const char*, bool> subs[] = {{"input_layernorm.weight", true},
                                               {"input_layernorm.bias", true},
                                               {"self_attention.query_key_value.weight", false},
                                               {"self_attention.query_key_value.bias", false},
                                               {"self_attention.dense.weight", false},
                                               {"self_attention.dense.bias", false},
                                               {"post_attention_layernorm.weight", true},
                                               {"post_attention_layernorm.bias", true},
                                               {"mlp.dense_h_to_4h.weight", false},
                                               {"mlp.dense_h_to_4h.bias", false},
                                               {"mlp.dense_4h_to_h.weight", false},
                                               {"mlp.dense_4h_to_h.bias", false}};
  const int64_t per = layers / n_pp;
  for (int64_t i = pp * per; i < (pp + 1) * per; ++i) {
    for (const auto& [sub, norm] : subs) {
      out.push_back({absl::StrCat(3 + i, ".", sub), absl::StrCat("layers.", i, ".", sub), norm});
    }
  }
  if (pp == n_pp - 1) {
    out.push_back({absl::StrCat(4 + layers, ".weight"), "final_layernorm.weight", true});
    out.push_back({absl::StrCat(4 + layers, ".bias"), "final_layernorm.bias", true});
  }
  return out;
}

// -1: replicated; 0: rows split over TP; 1: columns split (read_megatron_ds joins the same way).
int tp_dim(const std::string& fork) {
  for (const char* s : {"self_attention.dense.weight", "mlp.dense_4h_to_h.weight"}) {
    if (absl::EndsWith(fork, s)) return 1;
  }
  for (const char* s : {"query_key_value.weight", "query_key_value.bias", "dense_h_to_4h.weight",
                        "dense_h_to_4h.bias"}) {
    if (absl::EndsWith(fork, s)) return 0;
  }
  return fork == "word_embeddings.weight" ? 0 : -1;
}

// TP rank tp's piece of t ([rows] or [rows, cols]) along dim (-1: a copy).
engine::HostSlice tp_piece(const engine::HostSlice& t, int dim, int tp, int n_tp) {
  if (dim < 0 || n_tp == 1) return t;
  engine::HostSlice out = t;
  const int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
  out.shape[static_cast<size_t>(dim)] /= n_tp;
  const int64_t pr = out.shape[0], pc = out.shape.size() > 1 ? out.shape[1] : 1;
  const int64_t r0 = dim == 0 ? tp * pr : 0, c0 = dim == 1 ? tp * pc : 0;
  out.data.assign(static_cast<size_t>(pr * pc), 0.0f);
  for (int64_t r = 0; r < pr; ++r) {
    for (int64_t c = 0; c < pc; ++c) out.data[r * pc + c] = t.data[(r0 + r) * cols + c0 + c];
  }
  out.extent = out.shape;
  return out;
}

ValuePtr torch_size(const std::vector<int64_t>& shape) {
  std::vector<ValuePtr> dims;
  for (int64_t d : shape) dims.push_back(Value::integer(d));
  return Value::object("torch.Size", {Value::tuple(std::move(dims))}, false, nullptr);
}

// A dict entry under an integer key (the optimizer state's param group index).
void set_int_key(Value& dict, int64_t key, ValuePtr v) {
  dict.dict.emplace_back(Value::integer(key), std::move(v));
}

// An object made as pickle protocol 2 makes a plain class instance: cls.__new__(cls), then
// BUILD with its __dict__.
ValuePtr plain_object(const std::string& cls, ValuePtr state) {
  return Value::object(cls, {}, true, std::move(state));
}

std::string tensor_bytes(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::kF32) {
    std::string b(v.size() * 4, '\0');
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  std::string b(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = engine::f32_to_f16(v[i]);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

ValuePtr make_args(const MegatronDsCheckpoint& c, const MegatronDsArgs& a) {
  ValuePtr d = Value::make_dict();
  auto i = [&](const char* k, int64_t v) { d->set(k, Value::integer(v)); };
  auto f = [&](const char* k, double v) { d->set(k, Value::floating(v)); };
  auto b = [&](const char* k, bool v) { d->set(k, Value::boolean(v)); };
  i("num_layers", c.num_layers);
  i("hidden_size", c.hidden_size);
  i("ffn_hidden_size", c.ffn_hidden);
  i("num_attention_heads", c.num_heads);
  i("kv_channels", c.hidden_size / c.num_heads);
  i("seq_length", c.seq_length);
  i("max_position_embeddings", c.seq_length);
  // megatron.enums.PositionEmbeddingType.alibi, pickled as getattr(class, name)
  d->set("position_embedding_type",
         Value::object("builtins.getattr",
                       {Value::global("megatron.enums.PositionEmbeddingType"), Value::str("alibi")},
                       false, nullptr));
  b("embed_layernorm", true);
  i("make_vocab_size_divisible_by", a.vocab_divisible_by);
  i("padded_vocab_size", c.padded_vocab);
  d->set("tokenizer_type", Value::str("PretrainedFromHF"));
  i("tensor_model_parallel_size", c.tp);
  i("pipeline_model_parallel_size", c.pp);
  i("data_parallel_size", c.dp);
  i("micro_batch_size", a.micro_batch);
  i("global_batch_size", c.global_batch);
  d->set("rampup_batch_size", Value::none());
  i("train_samples", a.train_samples);
  f("lr", a.lr);
  f("min_lr", a.min_lr);
  d->set("lr_decay_style", Value::str(a.decay_style));
  i("lr_warmup_samples", a.warmup_samples);
  i("lr_decay_samples", a.decay_samples);
  d->set("lr_decay_tokens", Value::none());
  d->set("lr_warmup_tokens", Value::none());
  f("weight_decay", a.weight_decay);
  f("adam_beta1", a.beta1);
  f("adam_beta2", a.beta2);
  f("adam_eps", a.eps);
  f("clip_grad", a.clip_grad);
  b("fp16", a.params_dtype == DType::kF16);
  b("bf16", false);
  d->set("params_dtype",
         Value::global(a.params_dtype == DType::kF16 ? "torch.float16" : "torch.float32"));
  i("seed", c.seed);
  f("layernorm_epsilon", c.layernorm_epsilon);
  f("hidden_dropout", 0.0);
  f("attention_dropout", 0.0);
  b("apply_residual_connection_post_layernorm", false);
  d->set("glu_activation", Value::none());
  b("deepspeed", true);
  i("zero_stage", 1);
  i("iteration", c.iteration);
  i("consumed_train_samples", c.consumed_samples);
  i("consumed_valid_samples", c.consumed_valid_samples);
  i("consumed_train_tokens", c.consumed_tokens);
  return plain_object("argparse.Namespace", d);
}

double get_or(const std::map<std::string, double>& m, const char* k, double dflt) {
  auto it = m.find(k);
  return it == m.end() ? dflt : it->second;
}

}  // namespace

absl::Status write_megatron_ds(const MegatronDsCheckpoint& c, const MegatronDsArgs& a,
                               const std::string& dir) {
  if (a.params_dtype != DType::kF16 && a.params_dtype != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Megatron-DeepSpeed export: params dtype ", dtype_name(a.params_dtype),
                     " is not written (float16 or float32; bf16 is the fork's BF16_Optimizer "
                     "layout, bf16_zero_* files)"));
  }
  if (c.tp < 1 || c.pp < 1 || c.dp < 1 || c.num_layers % c.pp != 0 || c.num_heads % c.tp != 0 ||
      c.ffn_hidden % c.tp != 0 || c.padded_vocab % c.tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Megatron-DeepSpeed export: TP", c.tp, " x PP", c.pp, " x DP", c.dp, " does not divide ",
        c.num_layers, " layers over the stages or ", c.num_heads, " heads / ", c.ffn_hidden,
        " ffn / ", c.padded_vocab, " padded vocabulary rows over TP"));
  }
  std::error_code ec;
  if (std::filesystem::exists(dir + "/latest", ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir, "/latest exists: export into a new or empty directory"));
  }
  const std::string tag = absl::StrCat("global_step", c.iteration);
  const std::string step_dir = dir + "/" + tag;
  std::filesystem::create_directories(step_dir, ec);
  if (ec) return absl::DataLossError(absl::StrCat(step_dir, ": cannot create: ", ec.message()));
  auto tensor = [&](const std::string& name) -> absl::StatusOr<const engine::HostSlice*> {
    auto it = c.tensors.find(name);
    if (it == c.tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Megatron-DeepSpeed export: no tensor ", name));
    }
    return &it->second;
  };
  for (int pp = 0; pp < c.pp; ++pp) {
    const std::vector<StageParam> params = stage_params(pp, c.pp, c.num_layers);
    // Three groups (megatron/optimizer: weights with decay, in two halves; then no decay).
    std::vector<const StageParam*> wd, no_wd;
    for (const StageParam& p : params) {
      (p.norm || absl::EndsWith(p.pipe, "bias") ? no_wd : wd).push_back(&p);
    }
    const size_t half = wd.size() / 2;
    const std::vector<std::vector<const StageParam*>> groups = {
        {wd.begin(), wd.begin() + static_cast<std::ptrdiff_t>(half)},
        {wd.begin() + static_cast<std::ptrdiff_t>(half), wd.end()},
        no_wd};
    for (int tp = 0; tp < c.tp; ++tp) {
      const int mp = pp * c.tp + tp;
      // Layer files: DP rank 0's module weights (the last stage's tied copy is not saved).
      std::map<int64_t, std::pair<ValuePtr, PtWriter>> layer_files;
      for (const StageParam& p : params) {
        int64_t idx;
        std::string key;
        constexpr char kTied[] = "tied_modules.embed.";
        if (absl::StartsWith(p.pipe, kTied)) {
          if (pp != 0) continue;
          idx = 1;
          key = p.pipe.substr(sizeof(kTied) - 1);
        } else {
          idx = std::stoll(p.pipe.substr(0, p.pipe.find('.')));
          key = p.pipe.substr(p.pipe.find('.') + 1);
        }
        ANVIL_ASSIGN_OR_RETURN(const engine::HostSlice* t, tensor("fp32/" + p.fork));
        const engine::HostSlice piece = tp_piece(*t, tp_dim(p.fork), tp, c.tp);
        auto& [sd, w] = layer_files[idx];
        if (!sd) sd = Value::make_dict(/*ordered=*/true);
        sd->set(key, w.add_tensor(a.params_dtype, piece.shape,
                                  tensor_bytes(piece.data, a.params_dtype)));
      }
      for (auto& [idx, f] : layer_files) {
        ANVIL_RETURN_IF_ERROR(f.second.write(
            step_dir + absl::StrFormat("/layer_%02d-model_%02d-model_states.pt", idx, tp),
            *f.first));
      }
      // Each group's flat fp32 / exp_avg / exp_avg_sq, padded; param_shapes.
      std::vector<std::vector<float>> flat[3];
      std::vector<int64_t> numels;
      ValuePtr param_shapes = Value::list();
      std::vector<std::vector<std::pair<std::string, int64_t>>> group_names;
      for (const auto& g : groups) {
        ValuePtr shapes = Value::make_dict(/*ordered=*/true);
        std::vector<float> cat[3];
        group_names.emplace_back();
        const char* states[3] = {"fp32/", "exp_avg/", "exp_avg_sq/"};
        for (const StageParam* p : g) {
          for (int k = 0; k < 3; ++k) {
            ANVIL_ASSIGN_OR_RETURN(const engine::HostSlice* t, tensor(states[k] + p->fork));
            const engine::HostSlice piece = tp_piece(*t, tp_dim(p->fork), tp, c.tp);
            if (k == 0) {
              shapes->set(p->pipe, torch_size(piece.shape));
              group_names.back().emplace_back(p->pipe, static_cast<int64_t>(piece.data.size()));
            }
            cat[k].insert(cat[k].end(), piece.data.begin(), piece.data.end());
          }
        }
        param_shapes->items.push_back(shapes);
        const int64_t numel = static_cast<int64_t>(cat[0].size());
        const int64_t align = 2 * c.dp;
        const int64_t padded = (numel + align - 1) / align * align;
        for (int k = 0; k < 3; ++k) {
          cat[k].resize(static_cast<size_t>(padded), 0.0f);
          flat[k].push_back(std::move(cat[k]));
        }
        numels.push_back(numel);
      }
      for (int d = 0; d < c.dp; ++d) {
        PtWriter w;
        ValuePtr fp32 = Value::list(), state = Value::make_dict(), pgroups = Value::list();
        ValuePtr paddings = Value::list(), counts = Value::list(), mappings = Value::list();
        for (size_t g = 0; g < groups.size(); ++g) {
          const int64_t padded = static_cast<int64_t>(flat[0][g].size());
          const int64_t size = padded / c.dp, lo = d * size, hi = lo + size;
          const int64_t pad = d == c.dp - 1 ? padded - numels[g] : 0;
          auto part = [&](int k, int64_t end) {
            return std::vector<float>(flat[k][g].begin() + lo, flat[k][g].begin() + end);
          };
          fp32->items.push_back(w.add_f32({hi - pad - lo}, part(0, hi - pad)));
          ValuePtr st = Value::make_dict();
          st->set("exp_avg", w.add_f32({size}, part(1, hi)));
          st->set("exp_avg_sq", w.add_f32({size}, part(2, hi)));
          set_int_key(*state, static_cast<int64_t>(g), st);
          ValuePtr pg = Value::make_dict();
          pg->set("lr", Value::floating(a.current_lr));
          pg->set("bias_correction", Value::boolean(true));
          pg->set("betas", Value::tuple({Value::floating(a.beta1), Value::floating(a.beta2)}));
          pg->set("eps", Value::floating(a.eps));
          pg->set("weight_decay", Value::floating(g == 2 ? 0.0 : a.weight_decay));
          pg->set("amsgrad", Value::boolean(false));
          pg->set("step", Value::integer(c.adam_step));
          pg->set("params", Value::list({Value::integer(static_cast<int64_t>(g))}));
          pgroups->items.push_back(pg);
          paddings->items.push_back(Value::integer(pad));
          counts->items.push_back(Value::integer(c.dp));
          // Which parameters this partition holds a fragment of (DeepSpeed's tensor_fragment).
          ValuePtr m = Value::make_dict(/*ordered=*/true);
          int64_t off = 0;
          for (const auto& [pipe, n] : group_names[g]) {
            const int64_t s = std::max(off, lo), e = std::min(off + n, hi);
            if (s < e) {
              ValuePtr fa = Value::make_dict();
              fa->set("numel", Value::integer(e - s));
              fa->set("start", Value::integer(s - lo));
              m->set(pipe, plain_object("deepspeed.utils.tensor_fragment.fragment_address", fa));
            }
            off += n;
          }
          mappings->items.push_back(m);
        }
        // DeepSpeed's DynamicLossScaler record: the given numbers, DeepSpeed's defaults else.
        ValuePtr scaler_state = Value::make_dict();
        auto sf = [&](const char* k, double dflt) {
          scaler_state->set(k, Value::floating(get_or(c.loss_scaler, k, dflt)));
        };
        auto si = [&](const char* k, double dflt) {
          scaler_state->set(k,
                            Value::integer(static_cast<int64_t>(get_or(c.loss_scaler, k, dflt))));
        };
        sf("cur_scale", 1.0);
        si("cur_iter", static_cast<double>(c.iteration));
        si("last_overflow_iter", -1);
        sf("scale_factor", 2.0);
        si("scale_window", 1000);
        sf("min_scale", 1.0);
        si("delayed_shift", 2);
        si("cur_hysteresis", 2);
        scaler_state->set("consecutive_hysteresis", Value::boolean(false));
        scaler_state->set("raise_error_at_min_scale", Value::boolean(true));
        scaler_state->set("dynamic", Value::boolean(true));
        ValuePtr base = Value::make_dict();
        base->set("state", state);
        base->set("param_groups", pgroups);
        ValuePtr o = Value::make_dict();
        // No loss scaler recorded (a bf16 or fp32 run): none, as DeepSpeed's fp32 path saves.
        const bool scaled = !c.loss_scaler.empty();
        o->set("loss_scaler",
               scaled ? plain_object("deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
                                     scaler_state)
                      : Value::none());
        o->set("dynamic_loss_scale", Value::boolean(scaled));
        o->set("overflow", Value::boolean(false));
        o->set("clip_grad", Value::floating(a.clip_grad));
        o->set("base_optimizer_state", base);
        o->set("single_partition_of_fp32_groups", fp32);
        o->set("zero_stage", Value::object("deepspeed.runtime.zero.config.ZeroStageEnum",
                                           {Value::integer(1)}, false, nullptr));
        o->set("group_paddings", paddings);
        o->set("partition_count", counts);
        o->set("ds_version", Value::str("0.6.1"));
        o->set("param_slice_mappings", mappings);
        ValuePtr stage1 = Value::make_dict();
        stage1->set("stage", Value::integer(1));
        ValuePtr ds = Value::make_dict();
        ds->set("zero_optimization", stage1);
        ValuePtr root = Value::make_dict();
        root->set("optimizer_state_dict", o);
        root->set("ds_config", ds);
        root->set("ds_version", Value::str("0.6.1"));
        ANVIL_RETURN_IF_ERROR(w.write(
            step_dir + absl::StrFormat("/zero_pp_rank_%d_mp_rank_%02d_optim_states.pt", d, mp),
            *root));
      }
      // The engine's model-states file with the fork's client state.
      ValuePtr lr = Value::make_dict();
      lr->set("max_lr", Value::floating(a.lr));
      lr->set("warmup_steps", Value::integer(a.warmup_samples));
      lr->set("num_steps",
              Value::integer(static_cast<int64_t>(get_or(c.lr_scheduler, "num_steps", 0))));
      lr->set("warmup_tokens",
              Value::integer(static_cast<int64_t>(get_or(c.lr_scheduler, "warmup_tokens", 0))));
      lr->set("num_tokens",
              Value::integer(static_cast<int64_t>(get_or(c.lr_scheduler, "num_tokens", 0))));
      lr->set("decay_style", Value::str(a.decay_style));
      lr->set("decay_steps", Value::integer(a.decay_samples));
      lr->set("min_lr", Value::floating(a.min_lr));
      ValuePtr fp16 = Value::make_dict();
      fp16->set("enabled", Value::boolean(a.params_dtype == DType::kF16));
      ValuePtr stage1 = Value::make_dict();
      stage1->set("stage", Value::integer(1));
      ValuePtr ds = Value::make_dict();
      ds->set("train_batch_size", Value::integer(c.global_batch));
      ds->set("fp16", fp16);
      ds->set("zero_optimization", stage1);
      ValuePtr info = Value::make_dict();
      info->set("padded_vocab_size", Value::integer(c.padded_vocab));
      info->set("original_vocab_size", Value::integer(c.vocab));
      ValuePtr root = Value::make_dict();
      root->set("module", Value::none());
      root->set("buffer_names", Value::list());
      root->set("optimizer", Value::none());
      root->set("param_shapes", param_shapes);
      root->set("lr_scheduler", lr);
      root->set("sparse_tensor_module_names",
                Value::object("builtins.set", {Value::list()}, false, nullptr));
      // The engine's skipped (overflowed) steps, as read_megatron_ds reads a universal folder's
      // Adam step back: global_steps - skipped_steps + 1 (the optimizers' zero-gradient step).
      root->set("skipped_steps",
                Value::integer(std::max<int64_t>(0, c.iteration - c.adam_step + 1)));
      root->set("global_steps", Value::integer(c.iteration));
      root->set("global_samples", Value::integer(c.consumed_samples));
      root->set("dp_world_size", Value::integer(c.dp));
      root->set("mp_world_size", Value::integer(c.tp * c.pp));
      root->set("ds_config", ds);
      root->set("ds_version", Value::str("0.6.1"));
      root->set("args", make_args(c, a));
      root->set("checkpoint_version", Value::floating(3.0));
      root->set("iteration", Value::integer(c.iteration));
      root->set("tokens", Value::integer(c.consumed_tokens));
      root->set("checkpoint_info", info);
      ANVIL_RETURN_IF_ERROR(
          PtWriter().write(step_dir + absl::StrFormat("/mp_rank_%02d_model_states.pt", mp), *root));
    }
  }
  // `latest` last: a reader never sees a half-written tag.
  return write_file_atomic(dir + "/latest", tag);
}

}  // namespace anvil::io::torch_pt
