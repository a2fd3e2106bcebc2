// ParamTable: every parameter by name, with its logical shape, its views into the flat buffers
// (compute copy, f32 master, f32 gradient, AdamW m and v) and its optimizer group. Checkpoints,
// HF conversion and the optimizer walk this table; nothing else knows the flat layout.
// Names follow Hugging Face GPT-2 (wte.weight, h.0.attn.c_attn.weight, ...), weights stored
// [out, in] (nn.Linear orientation).
//
// Flat layout: a sequence of buckets (GPT: the embeddings, each layer, the final LayerNorm), the
// unit of gradient reduction and of ZeRO sharding. Inside a bucket the weight-decay parameters
// come first, in [begin, decay_end), then the no-decay ones, so two optimizer calls per bucket
// cover it. Every parameter starts at a multiple of kAlignElements, so each view is 256-byte
// aligned for f32 (128 for bf16), and each bucket's length is a multiple of the builder's
// bucket unit (ZeRO: dp * 64, so it splits evenly over DP); the gaps are padding that stays
// zero (zero gradient, zero master, so AdamW keeps it zero).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace anvil::model {

struct Param {
  std::string name;
  std::vector<int64_t> shape;  // logical shape
  bool weight_decay;           // false for biases and LayerNorm parameters
  int tp_split_dim = -1;       // for tensor parallelism: dim split across TP ranks, -1 = none
  int tp_parts = 1;            // blocks along tp_split_dim split separately (c_attn: q | k | v)
  // Dim 0 is the padded vocabulary (wte, lm_head): rows >= vocab_size are padding, initialized
  // to 0 and left out of checkpoints.
  bool vocab_rows = false;
  // The word embedding tied to the LM head: the first and the last pipeline stage each hold a
  // copy and sum their gradients (the embedding group); counted and saved by the first only.
  bool tied = false;
  int64_t offset = 0;         // element offset in the flat buffers
  engine::TensorView value;   // compute copy (act dtype); == master when act == grad dtype
  engine::TensorView master;  // f32 master weights
  engine::TensorView grad;    // f32 gradient (+=)
  engine::TensorView m;       // AdamW first moment (f32)
  engine::TensorView v;       // AdamW second moment (f32)

  int64_t numel() const;
};

class ParamTable {
 public:
  static constexpr int64_t kAlignElements = 64;

  std::vector<Param>& all() { return params_; }
  const std::vector<Param>& all() const { return params_; }
  const Param* find(const std::string& name) const;
  Param* find(const std::string& name);
  // Sum of the parameters' logical sizes (no padding).
  int64_t numel() const;

  struct Bucket {
    std::string name;
    int64_t begin = 0, decay_end = 0, end = 0;  // flat ranges; [begin, decay_end) decays
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Length of the flat buffers (with padding).
  int64_t flat_numel() const { return flat_numel_; }

  // Points every parameter's views into flat buffers of [flat_numel()] elements. An empty flat
  // leaves that field empty in every parameter.
  void bind(engine::TensorView value, engine::TensorView master, engine::TensorView grad,
            engine::TensorView m, engine::TensorView v);

 private:
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  int64_t flat_numel_ = 0;
  friend class ParamTableBuilder;
};

// Collects parameters in definition order (all() keeps it), then assigns flat offsets by group.
class ParamTableBuilder {
 public:
  // Starts a bucket; parameters added before the first call go to a bucket named "params".
  void begin_bucket(std::string name);
  // Returns the new parameter (valid until the next add), e.g. to set its flags.
  Param& add(std::string name, std::vector<int64_t> shape, bool weight_decay, int tp_split_dim = -1,
             int tp_parts = 1);
  // bucket_unit: each bucket's length is rounded up to a multiple of it (>= kAlignElements, a
  // multiple of it).
  ParamTable build(int64_t bucket_unit = ParamTable::kAlignElements);

 private:
  std::vector<Param> params_;
  std::vector<std::pair<std::string, size_t>> bucket_starts_;  // name, first parameter index
};

// Tensor parallelism: the element index in the whole (unsplit) parameter of element `local` of
// TP rank tp_rank's shard, p.shape being the shard's shape (rank-major shapes, at most 2 dims).
// Dim tp_split_dim of the whole parameter is tp_parts blocks; each block is split evenly over
// the ranks and rank r holds the r-th piece of every block, in block order.
int64_t tp_global_index(const Param& p, int64_t local, int tp, int tp_rank);

// Elements [offset, offset + prod(shape)) of a contiguous flat view, seen with `shape`.
engine::TensorView flat_slice(engine::TensorView flat, int64_t offset,
                              const std::vector<int64_t>& shape);

}  // namespace anvil::model
