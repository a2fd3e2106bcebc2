// What every model's forward and backward passes use around their ops: the cuBLASLt workspace
// attached to the caller's stream for one pass, and small f32/f64 results read back to the host.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace anvil::model {

// The cuBLASLt workspace a model attaches to its stream on CUDA (what cuBLASLt wants on Hopper).
inline constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// The caller owns the stream: attach the model's cuBLASLt workspace for one pass and put the
// caller's back afterwards (later GEMMs on the stream are ordered after ours, so no sync).
class GemmWorkspaceScope {
 public:
  GemmWorkspaceScope(engine::Stream& s, engine::Workspace ws) : s_(s), saved_(s.gemm_workspace()) {
    if (s_.is_cuda()) s_.set_gemm_workspace(ws);
  }
  ~GemmWorkspaceScope() {
    if (s_.is_cuda()) s_.set_gemm_workspace(saved_);
  }

 private:
  engine::Stream& s_;
  engine::Workspace saved_;
};

// Host copy of a one-dtype float view (f32 or f64) as doubles; syncs the stream.
std::vector<double> read_back(engine::ConstTensorView v, engine::Stream& s);

}  // namespace anvil::model
