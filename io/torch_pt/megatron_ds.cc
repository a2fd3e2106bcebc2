// Megatron-DeepSpeed checkpoint folders -> whole fork-named tensors (io/torch_pt/megatron_ds.h).
#include "io/torch_pt/megatron_ds.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "engine/status.h"
#include "io/torch_pt/pt_file.h"

namespace anvil::io::torch_pt {
namespace {

absl::Status field_error(const std::string& file, const std::string& field, const std::string& m) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", field, ": ", m));
}

absl::StatusOr<ValuePtr> need(const ValuePtr& v, const std::string& key, const std::string& file,
                              Value::Kind kind) {
  ValuePtr x = v ? (v->kind == Value::Kind::kDict ? v->get(key) : v->attr(key)) : nullptr;
  if (!x) return field_error(file, key, "missing");
  if (x->kind != kind) return field_error(file, key, absl::StrCat("a ", describe(*x)));
  return x;
}

absl::StatusOr<int64_t> need_int(const ValuePtr& v, const std::string& key,
                                 const std::string& file) {
  ANVIL_ASSIGN_OR_RETURN(ValuePtr x, need(v, key, file, Value::Kind::kInt));
  return x->i;
}

double number(const Value& v) { return v.kind == Value::Kind::kInt ? v.i : v.f; }

// The fork's name of a pipe-module parameter ("" for the last stage's tied embedding copy).
absl::StatusOr<std::string> fork_name(const std::string& pipe, int64_t layers, int pp,
                                      const std::string& file) {
  constexpr char kTied[] = "tied_modules.embed.";
  if (absl::StartsWith(pipe, kTied)) {
    if (pp > 0) return std::string();
    return pipe.substr(sizeof(kTied) - 1);
  }
  const size_t dot = pipe.find('.');
  int64_t idx;
  if (dot == std::string::npos || !absl::SimpleAtoi(pipe.substr(0, dot), &idx)) {
    return field_error(file, "param_shapes", absl::StrCat("unknown parameter ", pipe));
  }
  const std::string sub = pipe.substr(dot + 1);
  if (idx >= 3 && idx < 3 + layers) return absl::StrCat("layers.", idx - 3, ".", sub);
  if (idx == 4 + layers && (sub == "weight" || sub == "bias")) {
    return absl::StrCat("final_layernorm.", sub);
  }
  return field_error(
      file, "param_shapes",
      absl::StrCat("parameter ", pipe, " is not a layer of GPTModelPipe with ", layers, " layers"));
}

int tp_dim(const std::string& name) {  // -1: replicated
  for (const char* s : {"self_attention.dense.weight", "mlp.dense_4h_to_h.weight"}) {
    if (absl::EndsWith(name, s)) return 1;
  }
  for (const char* s : {"query_key_value.weight", "query_key_value.bias", "dense_h_to_4h.weight",
                        "dense_h_to_4h.bias"}) {
    if (absl::EndsWith(name, s)) return 0;
  }
  if (name == "word_embeddings.weight") return 0;
  return -1;
}

// Concatenates the TP pieces (each [rows, cols] or [rows]) along `dim`.
engine::HostSlice join(const std::string& name, const std::vector<engine::HostSlice>& parts,
                       int dim) {
  engine::HostSlice out;
  out.tensor = name;
  out.shape = parts[0].shape;
  if (dim < 0 || parts.size() == 1) {
    out = parts[0];
    out.tensor = name;
    return out;
  }
  out.shape[dim] = 0;
  for (const auto& p : parts) out.shape[dim] += p.shape[dim];
  const int64_t rows = out.shape[0], cols = out.shape.size() > 1 ? out.shape[1] : 1;
  out.data.resize(rows * cols);
  int64_t base = 0;
  for (const auto& p : parts) {
    const int64_t pr = p.shape[0], pc = p.shape.size() > 1 ? p.shape[1] : 1;
    for (int64_t r = 0; r < pr; ++r) {
      for (int64_t c = 0; c < pc; ++c) {
        const int64_t orow = dim == 0 ? base + r : r, ocol = dim == 1 ? base + c : c;
        out.data[orow * cols + ocol] = p.data[r * pc + c];
      }
    }
    base += p.shape[dim];
  }
  out.offset.assign(out.shape.size(), 0);
  out.extent = out.shape;
  return out;
}

// A 0-dim or one-element tensor, an int or a float (an optimizer's step count) as an integer.
absl::StatusOr<int64_t> step_value(const PtFile& f, const ValuePtr& v, const std::string& what) {
  if (v->kind == Value::Kind::kInt) return v->i;
  if (v->kind == Value::Kind::kFloat) return static_cast<int64_t>(v->f);
  if (v->kind == Value::Kind::kTensor && v->tensor.numel() == 1) {
    if (v->tensor.dtype == DType::kI64) {
      ANVIL_ASSIGN_OR_RETURN(std::string b, f.storage_bytes(v->tensor));
      int64_t x;
      std::memcpy(&x, b.data() + v->tensor.offset * 8, 8);
      return x;
    }
    ANVIL_ASSIGN_OR_RETURN(std::vector<float> x, f.read_f32(v->tensor, what));
    return static_cast<int64_t>(x[0]);
  }
  return field_error(f.path(), what, absl::StrCat("a ", describe(*v), " (expected a count)"));
}

std::string read_tag(const std::string& file) {
  std::ifstream in(file);
  std::string tag;
  if (!in || !std::getline(in, tag)) return "";
  return std::string(absl::StripAsciiWhitespace(tag));
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}
bool is_dir(const std::string& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

// DIR -> the folder of one checkpoint (c.dir) and its layout.
absl::Status locate(const std::string& dir, MegatronDsCheckpoint& c) {
  auto layout_of = [&](const std::string& d) {
    c.dir = d;
    c.layout = is_dir(d + "/zero") ? "universal" : "zero";
  };
  if (is_dir(dir + "/zero") && is_file(dir + "/mp_rank_00_model_states.pt")) {
    layout_of(dir);  // the universal folder itself
    return absl::OkStatus();
  }
  for (const char* latest : {"latest", "latest_universal"}) {
    const std::string file = dir + "/" + latest;
    if (!is_file(file)) continue;
    const std::string tag = read_tag(file);
    if (tag.empty() || tag.find('/') != std::string::npos || tag == "..") {
      return absl::InvalidArgumentError(absl::StrCat(file, ": tag '", tag, "' is not a name"));
    }
    layout_of(dir + "/" + tag);
    return absl::OkStatus();
  }
  if (is_file(dir + "/mp_rank_00_model_states.pt")) {
    layout_of(dir);  // a global_stepN folder named directly
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat(
      dir,
      "/latest: missing (not a DeepSpeed checkpoint folder: neither latest, latest_universal, "
      "mp_rank_00_model_states.pt nor a universal zero/ folder)"));
}

// The run's settings and counters from mp_rank_00_model_states.pt.
absl::Status read_model_states(MegatronDsCheckpoint& c) {
  const std::string mp0 = c.dir + "/mp_rank_00_model_states.pt";
  ANVIL_ASSIGN_OR_RETURN(PtFile f0, PtFile::open(mp0));
  const ValuePtr& r0 = f0.root();
  ANVIL_ASSIGN_OR_RETURN(ValuePtr args, need(r0, "args", mp0, Value::Kind::kObject));
  ANVIL_ASSIGN_OR_RETURN(c.iteration, need_int(r0, "iteration", mp0));
  ANVIL_ASSIGN_OR_RETURN(c.num_layers, need_int(args, "num_layers", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.hidden_size, need_int(args, "hidden_size", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.num_heads, need_int(args, "num_attention_heads", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.ffn_hidden, need_int(args, "ffn_hidden_size", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.padded_vocab, need_int(args, "padded_vocab_size", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.consumed_samples,
                         need_int(args, "consumed_train_samples", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.consumed_valid_samples,
                         need_int(args, "consumed_valid_samples", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.consumed_tokens, need_int(r0, "tokens", mp0));
  ANVIL_ASSIGN_OR_RETURN(c.seed, need_int(args, "seed", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.global_batch, need_int(args, "global_batch_size", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(c.seq_length, need_int(args, "seq_length", mp0 + " args"));
  ANVIL_ASSIGN_OR_RETURN(ValuePtr eps,
                         need(args, "layernorm_epsilon", mp0 + " args", Value::Kind::kFloat));
  c.layernorm_epsilon = eps->f;
  ANVIL_ASSIGN_OR_RETURN(ValuePtr info, need(r0, "checkpoint_info", mp0, Value::Kind::kDict));
  ANVIL_ASSIGN_OR_RETURN(c.vocab, need_int(info, "original_vocab_size", mp0 + " checkpoint_info"));
  ANVIL_ASSIGN_OR_RETURN(ValuePtr lr, need(r0, "lr_scheduler", mp0, Value::Kind::kDict));
  for (const auto& [k, v] : lr->dict) {
    if (k->kind == Value::Kind::kStr &&
        (v->kind == Value::Kind::kInt || v->kind == Value::Kind::kFloat)) {
      c.lr_scheduler[k->s] = number(*v);
    }
  }
  // The degrees it was saved with (the universal folder keeps no per-rank files but these).
  for (auto [key, out] : {std::pair<const char*, int*>{"tensor_model_parallel_size", &c.saved_tp},
                          {"pipeline_model_parallel_size", &c.saved_pp},
                          {"data_parallel_size", &c.saved_dp}}) {
    ValuePtr x = args->attr(key);
    if (x && x->kind == Value::Kind::kInt) *out = static_cast<int>(x->i);
  }
  if (ValuePtr x = r0->get("dp_world_size"); x && x->kind == Value::Kind::kInt) {
    c.saved_dp = static_cast<int>(x->i);
  }
  for (const char* key : {"random_rng_state", "np_rng_state", "torch_rng_state", "cuda_rng_state",
                          "rng_tracker_states"}) {
    if (r0->get(key)) c.rng_states.push_back(key);
  }
  for (auto [key, out] : {std::pair<const char*, int64_t*>{"global_steps", &c.global_steps},
                          {"skipped_steps", &c.skipped_steps}}) {
    ValuePtr x = r0->get(key);
    if (x && x->kind == Value::Kind::kInt) *out = x->i;
  }
  return absl::OkStatus();
}

// The ZeRO-1 (zero_pp_rank_*) or BF16_Optimizer (bf16_zero_pp_rank_*) files of c.dir.
absl::Status read_zero(MegatronDsCheckpoint& c) {
  int layer01 = 0, mp_files = 0, fp16_files = 0, bf16_files = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(c.dir, ec)) {
    const std::string n = e.path().filename().string();
    if (absl::StartsWith(n, "layer_01-model_")) ++layer01;
    if (absl::StartsWith(n, "mp_rank_") && absl::EndsWith(n, "_model_states.pt")) ++mp_files;
    if (absl::EndsWith(n, "_optim_states.pt")) {
      if (absl::StartsWith(n, "zero_pp_rank_")) ++fp16_files;
      if (absl::StartsWith(n, "bf16_zero_pp_rank_")) ++bf16_files;
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat(c.dir, ": ", ec.message()));
  if (fp16_files > 0 && bf16_files > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.dir, ": holds both zero_pp_rank_* (", fp16_files, ") and bf16_zero_pp_rank_* (",
        bf16_files, ") optimizer files: one run's checkpoint has one kind"));
  }
  const bool bf16 = bf16_files > 0;
  const int zero_files = bf16 ? bf16_files : fp16_files;
  const std::string prefix = bf16 ? "bf16_zero_pp_rank_" : "zero_pp_rank_";
  c.layout = bf16 ? "bf16_zero" : "zero";
  if (mp_files == 0 || zero_files == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.dir,
        ": no mp_rank_*_model_states.pt or zero_pp_rank_* / bf16_zero_pp_rank_*_optim_states.pt "
        "(ZeRO-1 or BF16_Optimizer checkpoints of a pipelined GPTModelPipe are read)"));
  }
  c.tp = layer01 > 0 ? layer01 : mp_files;
  c.pp = mp_files / c.tp;
  c.dp = zero_files / mp_files;
  if (c.pp * c.tp != mp_files || c.dp * mp_files != zero_files) {
    return absl::InvalidArgumentError(absl::StrCat(c.dir, ": ", layer01, " layer_01 files, ",
                                                   mp_files, " mp_rank files and ", zero_files,
                                                   " ZeRO files do not make a TP x PP x DP grid"));
  }
  std::map<std::string, std::vector<std::vector<engine::HostSlice>>> by_tp;  // name -> [tp]
  for (int pp = 0; pp < c.pp; ++pp) {
    for (int tp = 0; tp < c.tp; ++tp) {
      const int mp = pp * c.tp + tp;
      const std::string mpf = c.dir + absl::StrFormat("/mp_rank_%02d_model_states.pt", mp);
      ANVIL_ASSIGN_OR_RETURN(PtFile fm, PtFile::open(mpf));
      ANVIL_ASSIGN_OR_RETURN(ValuePtr shapes,
                             need(fm.root(), "param_shapes", mpf, Value::Kind::kList));
      std::vector<PtFile> zf;
      for (int d = 0; d < c.dp; ++d) {
        const std::string p =
            c.dir + absl::StrFormat("/%s%d_mp_rank_%02d_optim_states.pt", prefix, d, mp);
        ANVIL_ASSIGN_OR_RETURN(PtFile z, PtFile::open(p));
        zf.push_back(std::move(z));
      }
      for (size_t g = 0; g < shapes->items.size(); ++g) {
        // The group's flat fp32 / exp_avg / exp_avg_sq over all DP partitions, and the
        // alignment padding at the end of the last one (BF16_Optimizer keeps it in the fp32
        // partition too; ZeRO-1's state_dict strips it there).
        std::vector<float> flat[3];
        int64_t padding = 0;
        for (int d = 0; d < c.dp; ++d) {
          const std::string& zp = zf[d].path();
          ANVIL_ASSIGN_OR_RETURN(
              ValuePtr o, need(zf[d].root(), "optimizer_state_dict", zp, Value::Kind::kDict));
          ANVIL_ASSIGN_OR_RETURN(
              ValuePtr fp32, need(o, "single_partition_of_fp32_groups", zp, Value::Kind::kList));
          ANVIL_ASSIGN_OR_RETURN(ValuePtr base,
                                 need(o, "base_optimizer_state", zp, Value::Kind::kDict));
          ANVIL_ASSIGN_OR_RETURN(ValuePtr state, need(base, "state", zp, Value::Kind::kDict));
          ValuePtr st = state->get_int_key(static_cast<int64_t>(g));
          if (d == 0 && pp == 0 && tp == 0 && g == 0) {
            // The Adam step: apex FusedAdam keeps it per param group, DeepSpeed's FusedAdam
            // (>= 0.7) and torch.optim.AdamW per state.
            ANVIL_ASSIGN_OR_RETURN(ValuePtr groups,
                                   need(base, "param_groups", zp, Value::Kind::kList));
            ValuePtr step = !groups->items.empty() && groups->items[0]->kind == Value::Kind::kDict
                                ? groups->items[0]->get("step")
                                : nullptr;
            if (!step && st && st->kind == Value::Kind::kDict) step = st->get("step");
            if (step) {
              ANVIL_ASSIGN_OR_RETURN(c.adam_step, step_value(zf[d], step, "the Adam step"));
            }
            ValuePtr scaler = o->get("loss_scaler");
            if (scaler && scaler->kind == Value::Kind::kObject && scaler->state) {
              for (const auto& [k, v] : scaler->state->dict) {
                if (v->kind == Value::Kind::kInt || v->kind == Value::Kind::kFloat) {
                  c.loss_scaler[k->s] = number(*v);
                }
              }
            }
          }
          if (bf16) {
            // "group_paddings" (DeepSpeed >= 0.7) or "groups_padding" (0.6).
            ValuePtr pads = o->get("group_paddings");
            if (!pads) pads = o->get("groups_padding");
            if (!pads || pads->kind != Value::Kind::kList || g >= pads->items.size() ||
                pads->items[g]->kind != Value::Kind::kInt) {
              return field_error(zp, "group_paddings",
                                 absl::StrCat("missing or without param group ", g));
            }
            padding += pads->items[g]->i;
          }
          if (g >= fp32->items.size() || !st || st->kind != Value::Kind::kDict ||
              fp32->items[g]->kind != Value::Kind::kTensor) {
            return field_error(zp, "optimizer_state_dict",
                               absl::StrCat("no partition of param group ", g));
          }
          std::vector<ValuePtr> srcs = {fp32->items[g], st->get("exp_avg"), st->get("exp_avg_sq")};
          for (int k = 0; k < 3; ++k) {
            if (!srcs[k] || srcs[k]->kind != Value::Kind::kTensor) {
              return field_error(zp, "base_optimizer_state.state",
                                 absl::StrCat("group ", g, " lacks exp_avg / exp_avg_sq"));
            }
            ANVIL_ASSIGN_OR_RETURN(std::vector<float> v,
                                   zf[d].read_f32(srcs[k]->tensor, "a ZeRO partition"));
            flat[k].insert(flat[k].end(), v.begin(), v.end());
          }
        }
        const int64_t unpadded = static_cast<int64_t>(flat[0].size()) - padding;
        int64_t off = 0;
        const Value& names = *shapes->items[g];
        for (const auto& [key, size] : names.dict) {
          // torch.Size((d0, d1, ...))
          if (key->kind != Value::Kind::kStr || size->kind != Value::Kind::kObject ||
              size->items.size() != 1 || size->items[0]->kind != Value::Kind::kTuple) {
            return field_error(mpf, "param_shapes",
                               absl::StrCat("group ", g, ": not name -> Size"));
          }
          std::vector<int64_t> shape;
          int64_t numel = 1;
          for (const ValuePtr& x : size->items[0]->items) {
            shape.push_back(x->i);
            numel *= x->i;
          }
          if (off + numel > unpadded || off + numel > static_cast<int64_t>(flat[1].size()) ||
              off + numel > static_cast<int64_t>(flat[2].size())) {
            return field_error(mpf, "param_shapes",
                               absl::StrCat("group ", g, " needs more than the ", unpadded,
                                            " elements of its ZeRO partitions"));
          }
          ANVIL_ASSIGN_OR_RETURN(std::string name, fork_name(key->s, c.num_layers, pp, mpf));
          if (!name.empty()) {
            const char* prefixes[3] = {"fp32/", "exp_avg/", "exp_avg_sq/"};
            for (int k = 0; k < 3; ++k) {
              engine::HostSlice s;
              s.tensor = prefixes[k] + name;
              s.shape = shape;
              s.offset.assign(shape.size(), 0);
              s.extent = shape;
              s.data.assign(flat[k].begin() + off, flat[k].begin() + off + numel);
              auto& v = by_tp[s.tensor];
              v.resize(c.tp);
              v[tp].push_back(std::move(s));
            }
          }
          off += numel;
        }
        if (off != unpadded) {
          return field_error(mpf, "param_shapes",
                             absl::StrCat("group ", g, " covers ", off, " of the ", unpadded,
                                          " unpadded elements of its ZeRO partitions"));
        }
      }
    }
  }
  for (auto& [name, per_tp] : by_tp) {
    std::vector<engine::HostSlice> parts;
    for (int tp = 0; tp < c.tp; ++tp) {
      if (per_tp[tp].size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(c.dir, ": ", name, " held ",
                                                       per_tp[tp].size(), " times by TP rank ", tp,
                                                       " (expected once)"));
      }
      parts.push_back(per_tp[tp][0]);
    }
    const std::string fork = name.substr(name.find('/') + 1);
    c.tensors[name] = join(name, parts, tp_dim(fork));
  }
  return absl::OkStatus();
}

// A universal checkpoint (ds_to_universal.py): c.dir/zero/<pipe-module name>/{fp32, exp_avg,
// exp_avg_sq}.pt, each the whole TP-merged tensor ({"param": tensor, "cat_dim": ...,
// "vocab_divisibility_padding_tensor" or "vocab_tensor" for the embedding}, or a bare tensor),
// and step.pt (newer DeepSpeed) with the Adam step.
absl::Status read_universal(MegatronDsCheckpoint& c) {
  c.tp = c.saved_tp;
  c.pp = c.saved_pp;
  c.dp = c.saved_dp;
  const std::string zero = c.dir + "/zero";
  std::vector<std::string> params;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(zero, ec)) {
    if (e.is_directory()) params.push_back(e.path().filename().string());
  }
  if (ec) return absl::NotFoundError(absl::StrCat(zero, ": ", ec.message()));
  if (params.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(zero, ": no parameter folders"));
  }
  std::sort(params.begin(), params.end());
  bool have_step = false;
  for (const std::string& p : params) {
    const std::string where = zero + "/" + p;
    ANVIL_ASSIGN_OR_RETURN(std::string name, fork_name(p, c.num_layers, 0, where));
    const char* states[3][2] = {
        {"fp32", "fp32/"}, {"exp_avg", "exp_avg/"}, {"exp_avg_sq", "exp_avg_sq/"}};
    for (const auto& [file, prefix] : states) {
      const std::string path = absl::StrCat(where, "/", file, ".pt");
      ANVIL_ASSIGN_OR_RETURN(PtFile f, PtFile::open(path));
      ValuePtr t = f.root();
      if (t->kind == Value::Kind::kDict) t = t->get("param");
      if (!t || t->kind != Value::Kind::kTensor) {
        return field_error(path, "param",
                           absl::StrCat("missing or not a tensor (", describe(*f.root()), ")"));
      }
      ANVIL_ASSIGN_OR_RETURN(std::vector<float> v, f.read_f32(t->tensor, "the parameter"));
      engine::HostSlice s;
      s.tensor = prefix + name;
      s.shape = t->tensor.shape;
      s.offset.assign(s.shape.size(), 0);
      s.extent = s.shape;
      s.data = std::move(v);
      c.tensors[s.tensor] = std::move(s);
    }
    const std::string step = where + "/step.pt";
    if (!have_step && is_file(step)) {
      ANVIL_ASSIGN_OR_RETURN(PtFile f, PtFile::open(step));
      ANVIL_ASSIGN_OR_RETURN(c.adam_step, step_value(f, f.root(), "step"));
      have_step = true;
    }
  }
  if (!have_step) {
    // The fork's ds_to_universal.py keeps no step: the engine's counters give it. The ZeRO and
    // BF16 optimizers take one zero-gradient step at start (initialize_optimizer_states), which
    // apex's FusedAdam counts; overflowed fp16 steps are skipped.
    c.adam_step = c.global_steps - c.skipped_steps + 1;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MegatronDsCheckpoint> read_megatron_ds(const std::string& dir) {
  MegatronDsCheckpoint c;
  ANVIL_RETURN_IF_ERROR(locate(dir, c));
  if (!is_dir(c.dir)) return absl::NotFoundError(absl::StrCat(c.dir, ": no such folder"));
  ANVIL_RETURN_IF_ERROR(read_model_states(c));
  if (c.layout == "universal") {
    ANVIL_RETURN_IF_ERROR(read_universal(c));
  } else {
    ANVIL_RETURN_IF_ERROR(read_zero(c));
  }
  return c;
}

}  // namespace anvil::io::torch_pt
