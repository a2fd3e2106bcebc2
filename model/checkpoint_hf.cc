// The Hugging Face family registry and the table-driven tensor conversion (see checkpoint_hf.h).
#include "model/checkpoint_hf.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "engine/status.h"

namespace anvil::model {
namespace {

using engine::HostSlice;

constexpr char kLayer[] = "{i}";

HostSlice whole(std::string name, std::vector<int64_t> shape, std::vector<float> data) {
  return HostSlice{std::move(name), shape, std::vector<int64_t>(shape.size(), 0), shape,
                   std::move(data)};
}

std::string shape_str(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

int64_t rows_of(const HostSlice& t) { return t.shape.empty() ? 1 : t.shape[0]; }

// The layer index when `name` matches `pattern` ("{i}" = decimal digits), -1 for a match of a
// pattern without "{i}", nullopt for no match.
std::optional<int64_t> match(const std::string& pattern, const std::string& name) {
  const size_t at = pattern.find(kLayer);
  if (at == std::string::npos) return pattern == name ? std::optional<int64_t>(-1) : std::nullopt;
  const std::string pre = pattern.substr(0, at), post = pattern.substr(at + 3);
  if (name.size() <= pre.size() + post.size() || !absl::StartsWith(name, pre) ||
      !absl::EndsWith(name, post)) {
    return std::nullopt;
  }
  const std::string mid = name.substr(pre.size(), name.size() - pre.size() - post.size());
  int64_t i = 0;
  if (!std::all_of(mid.begin(), mid.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(mid, &i)) {
    return std::nullopt;
  }
  return i;
}

std::string at_layer(const std::string& pattern, int64_t i) {
  return i < 0 ? pattern : absl::StrReplaceAll(pattern, {{kLayer, absl::StrCat(i)}});
}

// Rows viewed as [a][b][rest] become [b][a][rest]. rows % (a b) == 0 is checked by callers.
HostSlice swap_row_blocks(const HostSlice& t, int64_t a, int64_t b) {
  const size_t rest = t.data.size() / static_cast<size_t>(a * b);
  HostSlice out = t;
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      std::copy_n(t.data.begin() + static_cast<std::ptrdiff_t>((i * b + j) * rest), rest,
                  out.data.begin() + static_cast<std::ptrdiff_t>((j * a + i) * rest));
    }
  }
  return out;
}

absl::Status check_heads(const HostSlice& t, const std::string& hf_name, int64_t heads) {
  if (rows_of(t) % (3 * heads) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(hf_name, ": shape ", shape_str(t.shape), " does not split into 3 x ", heads,
                   " heads (rows must be a multiple of ", 3 * heads, ")"));
}

// kGroupedQkv: the rows of HF's [q; k; v] (heads, kv_heads, kv_heads blocks of head rows)
// in anvil's grouped order (to_grouped) and back. Unchanged without grouping.
absl::Status check_qkv(const HostSlice& t, const std::string& hf_name, const HfDims& d) {
  const int64_t n = d.n_heads + 2 * d.kv();
  if (d.kv() >= 1 && d.n_heads % d.kv() == 0 && rows_of(t) % n == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      hf_name, ": shape ", shape_str(t.shape), " does not split into ", d.n_heads, " query + 2 x ",
      d.kv(), " key/value heads (rows must be a multiple of ", n, ", kv heads must divide heads)"));
}
HostSlice regroup_qkv(const HostSlice& t, const HfDims& d, bool to_grouped) {
  const int64_t H = d.n_heads, KV = d.kv(), G = H / KV;
  if (KV == H) return t;
  const size_t unit = t.data.size() / static_cast<size_t>(H + 2 * KV);  // elements per head
  HostSlice out = t;
  auto move = [&](int64_t stacked, int64_t grouped) {
    const int64_t from = to_grouped ? stacked : grouped, to = to_grouped ? grouped : stacked;
    std::copy_n(t.data.begin() + static_cast<std::ptrdiff_t>(from * unit), unit,
                out.data.begin() + static_cast<std::ptrdiff_t>(to * unit));
  };
  for (int64_t g = 0; g < KV; ++g) {
    for (int64_t j = 0; j < G; ++j) move(g * G + j, g * (G + 2) + j);
    move(H + g, g * (G + 2) + G);
    move(H + KV + g, g * (G + 2) + G + 1);
  }
  return out;
}

std::string with_prefix(const HfFamily& f, const std::string& hf) {
  const auto& u = f.unprefixed;
  return std::find(u.begin(), u.end(), hf) != u.end() ? hf : f.prefix + hf;
}

bool listed(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

// Concatenates the rows of `parts` (same trailing dims, checked) into one tensor.
absl::StatusOr<HostSlice> concat_rows(std::vector<HostSlice> parts,
                                      const std::vector<std::string>& hf_names,
                                      const std::string& name) {
  if (parts.size() == 1) {
    parts[0].tensor = name;
    return std::move(parts[0]);
  }
  std::vector<int64_t> shape = parts[0].shape;
  std::vector<float> data;
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::vector<int64_t>& s = parts[k].shape;
    if (s.empty() || s.size() != shape.size() ||
        !std::equal(s.begin() + 1, s.end(), shape.begin() + 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          hf_names[k], ": shape ", shape_str(s), " does not stack with ", hf_names[0], "'s ",
          shape_str(parts[0].shape), " into ", name, " (same dims after the first expected)"));
    }
    if (k > 0) shape[0] += s[0];
    data.insert(data.end(), parts[k].data.begin(), parts[k].data.end());
  }
  return whole(name, shape, std::move(data));
}

}  // namespace

const std::vector<const HfFamily*>& hf_families() {
  static const std::vector<const HfFamily*> all = {
      &gpt2_hf_family(),  &bloom_hf_family(), &llama_hf_family(),  &mistral_hf_family(),
      &qwen2_hf_family(), &bert_hf_family(),  &t5_v10_hf_family(), &t5_v11_hf_family()};
  return all;
}

absl::StatusOr<const HfFamily*> hf_family(const std::string& model_type,
                                          const std::map<std::string, std::string>& fields) {
  std::vector<std::string> names;
  std::vector<const HfFamily*> of_type;
  for (const HfFamily* f : hf_families()) {
    if (!listed(names, f->model_type)) names.push_back(f->model_type);
    if (f->model_type == model_type) of_type.push_back(f);
  }
  if (of_type.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model_type \"", model_type,
                     "\" is not supported (supported: ", absl::StrJoin(names, ", "), ")"));
  }
  // The first whose fixed fields `fields` does not contradict; none: the first, whose import
  // then names the field that differs.
  for (const HfFamily* f : of_type) {
    if (std::none_of(f->fixed.begin(), f->fixed.end(), [&](const HfFixedField& k) {
          auto it = fields.find(k.hf_key);
          return it != fields.end() && it->second != k.json_value;
        })) {
      return f;
    }
  }
  return of_type[0];
}

absl::StatusOr<std::vector<HostSlice>> to_hf_tensors(const HfFamily& f,
                                                     std::vector<HostSlice> anvil,
                                                     const HfDims& dims) {
  std::vector<HostSlice> out;
  for (HostSlice& t : anvil) {
    const HfTensorRule* rule = nullptr;
    std::optional<int64_t> layer;
    for (const HfTensorRule& r : f.tensors) {
      if ((layer = match(r.anvil, t.tensor))) {
        rule = &r;
        break;
      }
    }
    if (rule == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t.tensor, " has no Hugging Face ", f.model_type,
                       " name: the checkpoint is not a ", f.architecture, " model"));
    }
    if (rule->layout == HfLayout::kTransposed) t = transpose_2d(t);
    if (rule->layout == HfLayout::kHeadsInterleaved) {
      ANVIL_RETURN_IF_ERROR(check_heads(t, t.tensor, dims.n_heads));
      t = swap_row_blocks(t, 3, dims.n_heads);
    }
    const int64_t n = static_cast<int64_t>(rule->hf.size());
    // Head blocks per HF tensor: equal parts, or q | k | v of heads, kv, kv heads.
    std::vector<int64_t> blocks(static_cast<size_t>(n), 1);
    if (rule->layout == HfLayout::kGroupedQkv) {
      ANVIL_RETURN_IF_ERROR(check_qkv(t, t.tensor, dims));
      t = regroup_qkv(t, dims, /*to_grouped=*/false);
      if (n == 3) blocks = {dims.n_heads, dims.kv(), dims.kv()};
    }
    int64_t total = 0;
    for (int64_t b : blocks) total += b;
    if (t.shape.empty() || rows_of(t) % total != 0) {
      return absl::InvalidArgumentError(absl::StrCat(t.tensor, ": shape ", shape_str(t.shape),
                                                     " does not split into ", n, " HF tensors"));
    }
    const size_t unit = t.data.size() / static_cast<size_t>(total);
    size_t at = 0;
    for (int64_t k = 0; k < n; ++k) {
      std::vector<int64_t> shape = t.shape;
      shape[0] = shape[0] / total * blocks[static_cast<size_t>(k)];
      const size_t len = unit * static_cast<size_t>(blocks[static_cast<size_t>(k)]);
      out.push_back(
          whole(with_prefix(f, at_layer(rule->hf[k], *layer)), shape,
                std::vector<float>(t.data.begin() + static_cast<std::ptrdiff_t>(at),
                                   t.data.begin() + static_cast<std::ptrdiff_t>(at + len))));
      at += len;
    }
  }
  return out;
}

namespace {

// InvalidArgument naming both when a copy (HfFamily::copies) differs from its original.
absl::Status check_copies(const HfFamily& f, const std::vector<HostSlice>& hf) {
  auto find = [&](const std::string& name) -> const HostSlice* {
    for (const HostSlice& t : hf) {
      if (t.tensor == name) return &t;
    }
    return nullptr;
  };
  for (const auto& [copy, original] : f.copies) {
    const HostSlice* c = find(copy);
    const HostSlice* o = find(original);
    if (c != nullptr && o != nullptr && (c->shape != o->shape || c->data != o->data)) {
      return absl::InvalidArgumentError(
          absl::StrCat(copy, " differs from ", original, ": anvil's ", f.architecture,
                       " keeps one tensor for both (the checkpoint's model has them untied)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<HostSlice>> from_hf_tensors(const HfFamily& f, std::vector<HostSlice> hf,
                                                       const HfDims& dims, bool tied) {
  ANVIL_RETURN_IF_ERROR(check_copies(f, hf));
  // By canonical name (family prefix removed), skipping what anvil does not keep.
  std::map<std::string, HostSlice> by_name;
  for (HostSlice& t : hf) {
    const bool copy = std::any_of(f.copies.begin(), f.copies.end(),
                                  [&](const auto& c) { return c.first == t.tensor; });
    if (copy || listed(f.ignored_names, t.tensor) ||
        (tied && listed(f.tied_head_names, t.tensor)) ||
        std::any_of(f.ignored_suffixes.begin(), f.ignored_suffixes.end(),
                    [&](const std::string& s) { return absl::EndsWith(t.tensor, s); })) {
      continue;
    }
    std::string name(absl::StripPrefix(t.tensor, f.prefix));
    if (!by_name.emplace(name, std::move(t)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " appears twice (with and without \"", f.prefix, "\")"));
    }
  }
  std::vector<HostSlice> out;
  std::set<std::string> used;
  for (const HfTensorRule& r : f.tensors) {
    // The layers (or -1: a tensor outside the layers) any of the rule's HF tensors is at.
    std::set<int64_t> layers;
    for (const auto& [name, t] : by_name) {
      for (const std::string& p : r.hf) {
        if (const std::optional<int64_t> i = match(p, name)) layers.insert(*i);
      }
    }
    for (int64_t i : layers) {
      std::vector<HostSlice> parts;
      std::vector<std::string> names;
      for (const std::string& p : r.hf) {
        const std::string n = at_layer(p, i);
        auto it = by_name.find(n);
        if (it == by_name.end()) {
          return absl::InvalidArgumentError(absl::StrCat("missing HF tensor ", with_prefix(f, n),
                                                         " (anvil's ", at_layer(r.anvil, i), " is ",
                                                         absl::StrJoin(r.hf, " + "), ")"));
        }
        parts.push_back(it->second);
        names.push_back(it->second.tensor);
        used.insert(n);
      }
      if (r.layout == HfLayout::kGroupedQkv && parts.size() == 3) {
        // q_proj holds heads, k_proj and v_proj kv_heads blocks of equal rows.
        const int64_t q = rows_of(parts[0]), k = rows_of(parts[1]), v = rows_of(parts[2]);
        if (q % dims.n_heads != 0 || k != v || k * dims.n_heads != q * dims.kv()) {
          return absl::InvalidArgumentError(absl::StrCat(
              names[0], " ", shape_str(parts[0].shape), ", ", names[1], " ",
              shape_str(parts[1].shape), ", ", names[2], " ", shape_str(parts[2].shape),
              ": expected ", dims.n_heads, " query heads and ", dims.kv(),
              " key/value heads of one head size (num_attention_heads, num_key_value_heads)"));
        }
      }
      ANVIL_ASSIGN_OR_RETURN(HostSlice t,
                             concat_rows(std::move(parts), names, at_layer(r.anvil, i)));
      if (r.layout == HfLayout::kTransposed) t = transpose_2d(t);
      if (r.layout == HfLayout::kHeadsInterleaved) {
        ANVIL_RETURN_IF_ERROR(check_heads(t, names[0], dims.n_heads));
        t = swap_row_blocks(t, dims.n_heads, 3);
      }
      if (r.layout == HfLayout::kGroupedQkv) {
        ANVIL_RETURN_IF_ERROR(check_qkv(t, names[0], dims));
        t = regroup_qkv(t, dims, /*to_grouped=*/true);
      }
      out.push_back(std::move(t));
    }
  }
  for (const auto& [name, t] : by_name) {
    if (used.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("HF tensor ", t.tensor, " ", shape_str(t.shape), " is not part of anvil's ",
                       f.model_type, " model (a variant anvil does not implement?)"));
    }
  }
  return out;
}

HostSlice transpose_2d(const HostSlice& t) {
  if (t.shape.size() != 2) return t;
  const int64_t a = t.shape[0], b = t.shape[1];
  HostSlice out{t.tensor, {b, a}, {0, 0}, {b, a}, std::vector<float>(t.data.size())};
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      out.data[static_cast<size_t>(j * a + i)] = t.data[static_cast<size_t>(i * b + j)];
    }
  }
  return out;
}

}  // namespace anvil::model
