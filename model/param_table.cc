// ParamTable: lookup, flat-layout assignment (decay group first) and binding of the views.
#include "model/param_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::model {

namespace {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t align_elements(int64_t n) {
  return (n + ParamTable::kAlignElements - 1) / ParamTable::kAlignElements *
         ParamTable::kAlignElements;
}

}  // namespace

int64_t Param::numel() const { return shape_numel(shape); }

const Param* ParamTable::find(const std::string& name) const {
  for (const Param& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Param* ParamTable::find(const std::string& name) {
  for (Param& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

int64_t ParamTable::numel() const {
  int64_t n = 0;
  for (const Param& p : params_) n += p.numel();
  return n;
}

void ParamTable::bind(engine::TensorView value, engine::TensorView master, engine::TensorView grad,
                      engine::TensorView m, engine::TensorView v) {
  for (Param& p : params_) {
    auto at = [&](engine::TensorView flat) {
      return flat.empty() ? engine::TensorView{} : flat_slice(flat, p.offset, p.shape);
    };
    p.value = at(value);
    p.master = at(master);
    p.grad = at(grad);
    p.m = at(m);
    p.v = at(v);
  }
}

int64_t tp_global_index(const Param& p, int64_t local, int tp, int tp_rank) {
  if (p.tp_split_dim < 0 || tp == 1) return local;
  ANVIL_CHECK_MSG(p.shape.size() <= 2 && p.tp_split_dim < static_cast<int>(p.shape.size()),
                  absl::StrCat("tp_global_index: parameter ", p.name));
  const int64_t cols = p.shape.size() == 2 ? p.shape[1] : 1;
  int64_t row = local / cols, col = local % cols;
  if (p.tp_split_dim == 0) {
    const int64_t piece = p.shape[0] / p.tp_parts;  // rows of one block on one rank
    row = row / piece * piece * tp + tp_rank * piece + row % piece;
    return row * cols + col;
  }
  const int64_t piece = cols / p.tp_parts;
  col = col / piece * piece * tp + tp_rank * piece + col % piece;
  return row * cols * tp + col;
}

Param& ParamTableBuilder::add(std::string name, std::vector<int64_t> shape, bool weight_decay,
                              int tp_split_dim, int tp_parts) {
  Param p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.weight_decay = weight_decay;
  p.tp_split_dim = tp_split_dim;
  p.tp_parts = tp_parts;
  params_.push_back(std::move(p));
  return params_.back();
}

void ParamTableBuilder::begin_bucket(std::string name) {
  bucket_starts_.emplace_back(std::move(name), params_.size());
}

ParamTable ParamTableBuilder::build(int64_t bucket_unit) {
  ANVIL_CHECK_MSG(
      bucket_unit >= ParamTable::kAlignElements && bucket_unit % ParamTable::kAlignElements == 0,
      absl::StrCat("ParamTableBuilder: bucket unit ", bucket_unit));
  if (bucket_starts_.empty() || bucket_starts_.front().second != 0) {
    bucket_starts_.insert(bucket_starts_.begin(), {"params", 0});
  }
  ParamTable t;
  int64_t next = 0;
  for (size_t k = 0; k < bucket_starts_.size(); ++k) {
    const size_t first = bucket_starts_[k].second;
    const size_t last =
        k + 1 < bucket_starts_.size() ? bucket_starts_[k + 1].second : params_.size();
    if (first == last) continue;
    ParamTable::Bucket bucket;
    bucket.name = bucket_starts_[k].first;
    bucket.begin = next;
    // Two passes: the decay group takes the front of the bucket, the rest follows.
    for (bool decay : {true, false}) {
      for (size_t i = first; i < last; ++i) {
        Param& p = params_[i];
        if (p.weight_decay != decay) continue;
        p.offset = next;
        next = align_elements(next + p.numel());
      }
      if (decay) bucket.decay_end = next;
    }
    next = bucket.begin + (next - bucket.begin + bucket_unit - 1) / bucket_unit * bucket_unit;
    bucket.end = next;
    t.buckets_.push_back(bucket);
  }
  t.flat_numel_ = next;
  t.params_ = std::move(params_);
  params_.clear();
  bucket_starts_.clear();
  return t;
}

engine::TensorView flat_slice(engine::TensorView flat, int64_t offset,
                              const std::vector<int64_t>& shape) {
  const int64_t n = shape_numel(shape);
  ANVIL_CHECK_MSG(
      flat.is_contiguous() && shape.size() <= engine::kMaxDims && offset >= 0 &&
          offset + n <= flat.numel(),
      absl::StrCat("flat_slice at ", offset, " of ", n, " elements from ", engine::describe(flat)));
  engine::TensorView v = flat;
  v.data = static_cast<char*>(flat.data) + offset * engine::dtype_size(flat.dtype);
  v.ndim = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = engine::kMaxDims - 1; d >= 0; --d) {
    v.shape[d] = d < v.ndim ? shape[d] : 0;
    v.strides[d] = d < v.ndim ? stride : 0;
    if (d < v.ndim) stride *= shape[d];
  }
  return v;
}

}  // namespace anvil::model
