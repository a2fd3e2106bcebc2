// ParamTable: every parameter by name, with its logical shape, its views into the flat buffers
// (compute copy, f32 master, f32 gradient, AdamW m and v) and its optimizer group. Checkpoints,
// HF conversion and the optimizer walk this table; nothing else knows the flat layout.
// Names follow Hugging Face GPT-2 (wte.weight, h.0.attn.c_attn.weight, ...), weights stored
// [out, in] (nn.Linear orientation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace anvil::model {

struct Param {
  std::string name;
  std::vector<int64_t> shape;  // logical shape
  bool weight_decay;           // false for biases and LayerNorm parameters
  int tp_split_dim = -1;       // for tensor parallelism: dim split across TP ranks, -1 = none
  int64_t offset = 0;          // element offset in the flat buffers
  engine::TensorView value;    // compute copy (act dtype); == master on the CPU f32 path
  engine::TensorView master;   // f32 master weights
  engine::TensorView grad;     // f32 gradient (+=)
};

class ParamTable {
 public:
  std::vector<Param>& all() { return params_; }
  const std::vector<Param>& all() const { return params_; }
  const Param* find(const std::string& name) const;
  Param* find(const std::string& name);
  int64_t numel() const;

 private:
  std::vector<Param> params_;
  friend class ParamTableBuilder;
};

}  // namespace anvil::model
