// Key of the CUDA twin's cache of cuBLASLt matmul plans (ops/cuda/gemm.cu; internal to ops/).
// A plan (matmul descriptor, matrix layouts and the heuristic's first algorithm) depends only
// on what the key holds, so a cached plan is the one a fresh build and heuristic query would
// give:
//   shape and operation: m, n, k, trans_a, trans_b, batch and the resolved element strides
//     (the leading dimensions follow from m, n, k and the trans flags);
//   dtypes: A/B (bias and pre_gelu share A's dtype: the dispatcher checks it) and D;
//   the epilogue asked of cuBLASLt (kNone for a plain GEMM and for the fallback path);
//   beta == 0 (C is not read then);
//   the alignment class of every pointer the heuristic sees (A, B, D, bias, aux): the largest
//     power of two <= 256 bytes dividing the address (and, for batches, the stride in bytes),
//     passed to the heuristic as the operands' minimum alignment;
//   the workspace bytes the heuristic may use, and the CUDA device (algorithms are per device).
// Host code only, so the key logic is unit-tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/dtype.h"
#include "ops/gemm.h"

namespace anvil::ops::detail {

struct GemmPlanKey {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements, packed strides filled in
  uint64_t workspace_bytes = 0;
  int device = 0;
  engine::DType ab = engine::DType::kBF16, d = engine::DType::kBF16;
  Epilogue epilogue = Epilogue::kNone;
  bool trans_a = false, trans_b = false, beta_zero = true;
  // Bytes, powers of two in [1, 256]; bias / aux: 256 when the epilogue has none.
  uint32_t align_a = 256, align_b = 256, align_d = 256, align_bias = 256, align_aux = 256;

  bool operator==(const GemmPlanKey& o) const;
  bool operator!=(const GemmPlanKey& o) const { return !(*this == o); }
};

struct GemmPlanKeyHash {
  size_t operator()(const GemmPlanKey& key) const;
};

// Largest power of two <= 256 dividing the address and, when batch > 1, the batch stride in
// bytes: cuBLASLt's heuristic assumes 256-byte aligned operands unless told otherwise.
uint32_t gemm_alignment_bytes(const void* p, int64_t stride_elems, size_t elem_bytes,
                              int64_t batch);

// The key of `args` (with `epilogue` being the one asked of cuBLASLt) on these operands.
// bias / aux: the epilogue's pointers, null when it has none.
GemmPlanKey gemm_plan_key(const GemmArgs& args, Epilogue epilogue, engine::DType ab_dtype,
                          engine::DType d_dtype, const void* a, const void* b, const void* d,
                          const void* bias, const void* aux, uint64_t workspace_bytes, int device);

// Plans cached for the calling thread by the CUDA twin (0 until it runs a GEMM).
size_t gemm_plan_cache_size();

}  // namespace anvil::ops::detail
