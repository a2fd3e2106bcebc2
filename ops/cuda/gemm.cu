// CUDA twin of ops/gemm.h: cuBLASLt (CUBLAS_COMPUTE_32F, f32 scale) for
//   D[b] = epilogue(alpha * op(A[b]) op(B[b]) + beta * D[b])           (row-major, all views)
// and a deterministic column reduction for dbias[n] += sum over rows of dy[rows, n].
//
// Row-major to column-major: a row-major [r, c] matrix is the column-major [c, r] matrix with
// ld = c, so row-major D = op(A) op(B) is column-major D^T = op(B)^T op(A)^T: cuBLASLt's "A" is
// our B and its "B" is our A, with the same trans flags, and D^T is [n, m] with ld = n. The bias
// [n] then runs along D^T's rows, which is what CUBLASLT_EPILOGUE_BIAS broadcasts, and the GELU
// aux matrix (pre_gelu, [m, n] row-major) is column-major [n, m] with ld = n.
//
// Epilogues map to CUBLASLT_EPILOGUE_BIAS, _GELU_AUX_BIAS (aux = pre-activation, written) and
// _DGELU (aux read). cuBLASLt wants the aux ld to be a multiple of 8 and may have no kernel for
// a configuration (mixed D/bias dtypes, odd alignment); then we run the plain GEMM and apply the
// epilogue with our own elementwise kernel, never a silently different result.
//
// Plans (descriptor, layouts, the heuristic's first algorithm) are built once per key
// (ops/gemm_plan.h: shape, dtypes, epilogue, strides, beta == 0, pointer alignment classes,
// workspace bytes, device) and cached per host thread; a call then only points the epilogue at
// its bias / aux and launches, with the algorithm a fresh heuristic query would pick.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "engine/arena.h"
#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/gemm.h"
#include "ops/gemm_plan.h"

namespace anvil::ops::cuda {
namespace {

using engine::DType;

__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  const float t = tanhf(c * (x + a * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * a * x * x);
}

// ---- fallback epilogues: d holds acc = alpha * op(A) op(B) + beta * D already -----------------

// d: [rows, cols] TD (+= bias); bias: [cols] TA.
template <typename TD, typename TA>
__global__ void bias_add_grid_stride(TD* d, const TA* bias, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    d[i] = from_f32<TD>(to_f32(d[i]) + to_f32(bias[i % cols]));
  }
}

// pre_gelu = d + bias (=), d = gelu(pre) computed from the f32 pre-activation as cuBLASLt does.
template <typename TD, typename TA>
__global__ void bias_gelu_grid_stride(TD* d, TA* pre_gelu, const TA* bias, int64_t rows,
                                      int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float pre = to_f32(d[i]) + to_f32(bias[i % cols]);
    pre_gelu[i] = from_f32<TA>(pre);
    d[i] = from_f32<TD>(gelu_tanh(pre));
  }
}

// d *= gelu'(pre_gelu).
template <typename TD, typename TA>
__global__ void dgelu_grid_stride(TD* d, const TA* pre_gelu, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    d[i] = from_f32<TD>(to_f32(d[i]) * gelu_tanh_grad(to_f32(pre_gelu[i])));
  }
}

// ---- bias gradient ------------------------------------------------------------------------------

constexpr int kBiasCols = 32;       // columns per block: one warp reads 32 adjacent columns
constexpr int kBiasRowThreads = 8;  // warps per block, each on its own rows
constexpr int kBiasBlocks = 1056;   // target grid (8 blocks per multiprocessor on 132)

// partial[split, col] (=) = sum of dy[r, col] over the rows of this split (blockIdx.y of
// gridDim.y equal row ranges); with gridDim.y == 1 it adds straight into dbias instead.
// Each warp sums its rows, then the warps are added in a fixed order: deterministic.
template <typename T>
__global__ void bias_backward_partials(float* out, const T* dy, int64_t rows, int64_t cols,
                                       bool accumulate) {
  __shared__ float partial[kBiasRowThreads][kBiasCols + 1];  // +1: no bank conflicts
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kBiasCols + threadIdx.x;
  const int64_t per = (rows + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float acc = 0.0f;
  if (col < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kBiasRowThreads) {
      acc += to_f32(dy[r * cols + col]);
    }
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float sum = 0.0f;
    for (int i = 0; i < kBiasRowThreads; ++i) sum += partial[i][threadIdx.x];
    if (accumulate) {
      out[col] += sum;
    } else {
      out[blockIdx.y * cols + col] = sum;
    }
  }
}

// dbias[col] += sum over splits of partial[split, col], in split order.
__global__ void bias_backward_finish(float* dbias, const float* partial, int64_t splits,
                                     int64_t cols) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < cols;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int64_t s = 0; s < splits; ++s) sum += partial[s * cols + col];
    dbias[col] += sum;
  }
}

// ---- cuBLASLt -----------------------------------------------------------------------------------

cudaDataType_t cuda_dtype(DType t) {
  switch (t) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kF32:
      return CUDA_R_32F;
    default:
      break;
  }
  ANVIL_CHECK_MSG(false, "cuda::gemm: unsupported dtype " + std::string(engine::dtype_name(t)));
  return CUDA_R_32F;
}

// The cuBLASLt objects of one matmul configuration: descriptor, layouts and the heuristic's
// first algorithm (or why there is none). Owns the descriptors.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;  // not SUCCESS: no algorithm, fall back
  cublasLtMatmulAlgo_t algo = {};

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void set_batch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  const int32_t count = static_cast<int32_t>(batch);
  ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof(count)));
  ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
      layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

// What the epilogue needs besides the operands (null when unused).
struct LtEpilogue {
  Epilogue kind = Epilogue::kNone;
  const void* bias = nullptr;
  const void* aux = nullptr;  // pre_gelu: written by GELU_AUX_BIAS, read by DGELU
};

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kBiasGelu:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kDGelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::kBiasGradA:
      return CUBLASLT_EPILOGUE_BGRADB;  // cuBLASLt's B is our A (swapped operands)
    case Epilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Points the descriptor's epilogue at this call's bias and aux (the rest of a plan is fixed by
// its key; these pointers change per call within one alignment class).
void set_epilogue_pointers(cublasLtMatmulDesc_t op, const LtEpilogue& epi) {
  if (epi.bias != nullptr) {
    ANVIL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &epi.bias, sizeof(epi.bias)));
  }
  if (epi.aux != nullptr) {
    ANVIL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                      &epi.aux, sizeof(epi.aux)));
  }
}

// Builds the descriptors of `key` and asks the heuristic for its first algorithm, with the
// epilogue pointed at this call's bias / aux.
std::unique_ptr<LtPlan> build_plan(const detail::GemmPlanKey& key, const LtEpilogue& epi,
                                   cublasLtHandle_t handle) {
  const int64_t m = key.m, n = key.n, k = key.k;
  const cudaDataType_t ab_type = cuda_dtype(key.ab);
  const cudaDataType_t d_type = cuda_dtype(key.d);  // C has D's type (C = D, in place)
  auto plan = std::make_unique<LtPlan>();
  ANVIL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Swapped operands (see the top of the file): cuBLASLt A = our B, cuBLASLt B = our A.
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  ANVIL_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  ANVIL_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  // Our B, column-major: [n, k] ld n when stored row-major [k, n]; [k, n] ld k when [n, k].
  if (key.trans_b) {
    ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, ab_type, k, n, k));
  } else {
    ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, ab_type, n, k, n));
  }
  // Our A, column-major: [k, m] ld k when stored row-major [m, k]; [m, k] ld m when [k, m].
  if (key.trans_a) {
    ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, ab_type, m, k, m));
  } else {
    ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, ab_type, k, m, k));
  }
  ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, d_type, n, m, n));
  ANVIL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, d_type, n, m, n));
  if (key.batch > 1) {
    set_batch(plan->a, key.batch, key.stride_b);
    set_batch(plan->b, key.batch, key.stride_a);
    set_batch(plan->c, key.batch, key.stride_d);
    set_batch(plan->d, key.batch, key.stride_d);
  }

  if (key.epilogue != Epilogue::kNone) {
    const cublasLtEpilogue_t kind = lt_epilogue(key.epilogue);
    ANVIL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                      &kind, sizeof(kind)));
    set_epilogue_pointers(plan->op, epi);
    const int32_t act_type = ab_type;  // bias and aux have A's dtype; the default is D's
    // (the bias gradient keeps the default: f32 with the f32 weight gradients).
    if (epi.bias != nullptr && ab_type != d_type && key.epilogue != Epilogue::kBiasGradA) {
      ANVIL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &act_type, sizeof(act_type)));
    }
    if (epi.aux != nullptr) {
      const int64_t aux_ld = n;  // column-major [n, m] view of the row-major [m, n] pre_gelu
      ANVIL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
      if (ab_type != d_type) {
        ANVIL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &act_type, sizeof(act_type)));
      }
    }
  }

  // The preference only feeds the heuristic query.
  cublasLtMatmulPreference_t pref = nullptr;
  ANVIL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws_bytes = key.workspace_bytes;
  // cuBLASLt A = our B, cuBLASLt B = our A; C = D.
  const uint32_t align[4] = {key.align_b, key.align_a, key.align_d, key.align_d};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  ANVIL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  for (int i = 0; i < 4; ++i) {
    ANVIL_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i])));
  }
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  plan->status = cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->a, plan->b, plan->c,
                                                plan->d, pref, 1, &heuristic, &found);
  ANVIL_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (plan->status == CUBLAS_STATUS_SUCCESS &&
      (found == 0 || heuristic.state != CUBLAS_STATUS_SUCCESS)) {
    plan->status = CUBLAS_STATUS_NOT_SUPPORTED;
  }
  plan->algo = heuristic.algo;
  return plan;
}

// Plans by key, per host thread. A function-local thread_local rather than a member of
// engine::Stream: engine/ cannot name ops/ types, and a per-thread map needs no lock, also
// around the per-call epilogue pointers written into a cached descriptor before
// cublasLtMatmul reads it. Training shapes are few; should a program cycle through many, the
// map is cleared at kMaxPlans entries rather than grow without bound.
constexpr size_t kMaxPlans = 1024;
using PlanCache =
    std::unordered_map<detail::GemmPlanKey, std::unique_ptr<LtPlan>, detail::GemmPlanKeyHash>;
PlanCache& plan_cache() {
  thread_local PlanCache cache;
  return cache;
}

// Runs one cuBLASLt matmul. Returns CUBLAS_STATUS_SUCCESS when it was launched, otherwise the
// status that says why not (no algorithm: CUBLAS_STATUS_NOT_SUPPORTED); nothing is launched
// then, so the caller may fall back.
cublasStatus_t lt_matmul(const GemmArgs& args, const LtEpilogue& epi, TensorView d,
                         ConstTensorView a, ConstTensorView b, Stream& stream) {
  const engine::Workspace ws = stream.gemm_workspace();
  const uint64_t ws_bytes = ws.data != nullptr ? ws.bytes : 0;
  int device = 0;
  ANVIL_CUDA_CHECK(cudaGetDevice(&device));
  const detail::GemmPlanKey key =
      detail::gemm_plan_key(args, epi.kind, a.dtype, d.dtype, a.data, b.data, d.data, epi.bias,
                            epi.aux, ws_bytes, device);
  PlanCache& cache = plan_cache();
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxPlans) cache.clear();
    it = cache.emplace(key, build_plan(key, epi, stream.cublaslt())).first;
  } else if (it->second->status == CUBLAS_STATUS_SUCCESS) {
    set_epilogue_pointers(it->second->op, epi);
  }
  const LtPlan& plan = *it->second;
  if (plan.status != CUBLAS_STATUS_SUCCESS) return plan.status;

  const float alpha = args.alpha, beta = args.beta;
  // C = D in place (same layout), so beta = 1 accumulates into D; with beta = 0 C is not read.
  return cublasLtMatmul(stream.cublaslt(), plan.op, &alpha, b.data, plan.a, a.data, plan.b, &beta,
                        d.data, plan.c, d.data, plan.d, &plan.algo, ws.data, ws_bytes,
                        stream.cuda_stream());
}

std::string describe_gemm(const GemmArgs& args, const TensorView& d, const ConstTensorView& a) {
  return "m=" + std::to_string(args.m) + " n=" + std::to_string(args.n) +
         " k=" + std::to_string(args.k) + " batch=" + std::to_string(args.batch) +
         " trans_a=" + std::to_string(args.trans_a) + " trans_b=" + std::to_string(args.trans_b) +
         " a " + engine::describe(a) + " d " + engine::describe(d);
}

void plain_matmul_or_die(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
                         Stream& stream) {
  const cublasStatus_t st = lt_matmul(args, LtEpilogue{}, d, a, b, stream);
  ANVIL_CHECK_MSG(st == CUBLAS_STATUS_SUCCESS, "cuda::gemm: cuBLASLt failed (" +
                                                   std::string(cublasLtGetStatusName(st)) +
                                                   ") for " + describe_gemm(args, d, a));
  ANVIL_CUDA_LAUNCH_CHECK();  // with ANVIL_SYNC_CHECK=1, report faults at this GEMM
}

int grid_for(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);  // grid-stride loops cover the rest
}

template <typename TD, typename TA>
void fallback_epilogue(const GemmArgs& args, TensorView d, ConstTensorView bias,
                       TensorView pre_gelu, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t total = args.m * args.n;
  const int grid = grid_for(total, kThreads);
  switch (args.epilogue) {
    case Epilogue::kBias:
      bias_add_grid_stride<TD, TA>
          <<<grid, kThreads, 0, stream>>>(d.as<TD>(), bias.as<TA>(), args.m, args.n);
      break;
    case Epilogue::kBiasGelu:
      bias_gelu_grid_stride<TD, TA><<<grid, kThreads, 0, stream>>>(d.as<TD>(), pre_gelu.as<TA>(),
                                                                   bias.as<TA>(), args.m, args.n);
      break;
    case Epilogue::kDGelu:
      dgelu_grid_stride<TD, TA>
          <<<grid, kThreads, 0, stream>>>(d.as<TD>(), pre_gelu.as<TA>(), total);
      break;
    case Epilogue::kNone:
    case Epilogue::kBiasGradA:  // gemm_bias_grad's own fallback
      return;
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void gemm(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
          ConstTensorView bias, TensorView pre_gelu, Stream& stream) {
  if (args.epilogue == Epilogue::kNone) {
    plain_matmul_or_die(args, d, a, b, stream);
    return;
  }
  LtEpilogue epi;
  epi.kind = args.epilogue;
  bool fusable = true;
  switch (args.epilogue) {
    case Epilogue::kBias:
      epi.bias = bias.data;
      break;
    case Epilogue::kBiasGelu:
      epi.bias = bias.data;
      epi.aux = pre_gelu.data;
      // cuBLASLt needs the aux ld divisible by 8. With beta != 0 we keep to the documented
      // order (beta * D before the bias and GELU) by applying the epilogue ourselves.
      fusable = args.n % 8 == 0 && args.beta == 0.0f;
      break;
    case Epilogue::kDGelu:
      epi.aux = pre_gelu.data;
      fusable = args.n % 8 == 0 && args.beta == 0.0f;
      break;
    case Epilogue::kNone:
    case Epilogue::kBiasGradA:  // refused by the dispatcher
      break;
  }
  if (fusable && lt_matmul(args, epi, d, a, b, stream) == CUBLAS_STATUS_SUCCESS) {
    ANVIL_CUDA_LAUNCH_CHECK();
    return;
  }

  // No fused kernel: D = acc with cuBLASLt, then the epilogue elementwise.
  GemmArgs plain = args;
  plain.epilogue = Epilogue::kNone;
  plain_matmul_or_die(plain, d, a, b, stream);
  const cudaStream_t s = stream.cuda_stream();
  // D is f32 or A's dtype (checked by ops/gemm.cc).
  dispatch_act<true>(a.dtype, "cuda::gemm", [&](auto tag) {
    using TA = std::remove_pointer_t<decltype(tag)>;
    if (d.dtype == DType::kF32) {
      fallback_epilogue<float, TA>(args, d, bias, pre_gelu, s);
    } else {
      ANVIL_CHECK_MSG(d.dtype == a.dtype,
                      "cuda::gemm: unsupported dtypes " + describe_gemm(args, d, a));
      fallback_epilogue<TA, TA>(args, d, bias, pre_gelu, s);
    }
  });
}

void bias_backward(TensorView dbias, ConstTensorView dy, Stream& stream) {
  const int64_t cols = dy.dim(-1);
  const int64_t rows = cols > 0 ? dy.numel() / cols : 0;
  if (cols == 0) return;
  // Rows are split so the grid fills the GPU; the per-split sums go to the stream's GEMM
  // workspace (free between GEMMs on this stream) and a second kernel adds them in order.
  const int64_t col_blocks = (cols + kBiasCols - 1) / kBiasCols;
  const engine::Workspace ws = stream.gemm_workspace();
  int64_t splits = std::max<int64_t>(1, std::min<int64_t>(kBiasBlocks / col_blocks, rows / 64));
  splits = std::min<int64_t>(splits, static_cast<int64_t>(ws.bytes / (sizeof(float) * cols)));
  splits = std::max<int64_t>(splits, 1);
  const bool direct = splits == 1;
  float* out = direct ? dbias.as<float>() : static_cast<float*>(ws.data);
  const dim3 block(kBiasCols, kBiasRowThreads);
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(splits));
  cudaStream_t cs = stream.cuda_stream();
  dispatch_act<true>(dy.dtype, "cuda::bias_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bias_backward_partials<T><<<grid, block, 0, cs>>>(out, dy.as<T>(), rows, cols, direct);
  });
  ANVIL_CUDA_LAUNCH_CHECK();
  if (!direct) {
    const int threads = 256;
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>((cols + threads - 1) / threads, 1024));
    bias_backward_finish<<<blocks, threads, 0, cs>>>(dbias.as<float>(), out, splits, cols);
    ANVIL_CUDA_LAUNCH_CHECK();
  }
}

namespace {

thread_local size_t fused_bias_grad_calls = 0;

// dst[i] += src[i]
__global__ void add_f32(float* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] += src[i];
  }
}

// Restores the stream's GEMM workspace when it goes out of scope.
class WorkspaceRestore {
 public:
  explicit WorkspaceRestore(Stream& s) : s_(s), saved_(s.gemm_workspace()) {}
  ~WorkspaceRestore() { s_.set_gemm_workspace(saved_); }

 private:
  Stream& s_;
  engine::Workspace saved_;
};

}  // namespace

void gemm_bias_grad(const GemmArgs& args, TensorView d, TensorView dbias, ConstTensorView a,
                    ConstTensorView b, Stream& stream) {
  // The BGRADB sums overwrite their vector, so they go to a scratch carved from the end of the
  // GEMM workspace (the GEMM itself gets the rest) and are then added to dbias.
  const engine::Workspace ws = stream.gemm_workspace();
  const size_t scratch_bytes = engine::align_up(static_cast<size_t>(args.m) * sizeof(float));
  constexpr size_t kMinLtWorkspace = size_t{1} << 20;
  const bool half = a.dtype == DType::kBF16 || a.dtype == DType::kF16;
  if (half && ws.data != nullptr && ws.bytes >= scratch_bytes + kMinLtWorkspace) {
    float* scratch =
        reinterpret_cast<float*>(static_cast<char*>(ws.data) + ws.bytes - scratch_bytes);
    cublasStatus_t st;
    {
      WorkspaceRestore restore(stream);
      stream.set_gemm_workspace(engine::Workspace{ws.data, ws.bytes - scratch_bytes});
      GemmArgs fused = args;
      fused.epilogue = Epilogue::kBiasGradA;
      LtEpilogue epi;
      epi.kind = Epilogue::kBiasGradA;
      epi.bias = scratch;
      st = lt_matmul(fused, epi, d, a, b, stream);
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
      ANVIL_CUDA_LAUNCH_CHECK();
      add_f32<<<grid_for(args.m, 256), 256, 0, stream.cuda_stream()>>>(dbias.as<float>(), scratch,
                                                                       args.m);
      ANVIL_CUDA_LAUNCH_CHECK();
      ++fused_bias_grad_calls;
      return;
    }
  }
  plain_matmul_or_die(args, d, a, b, stream);
  cuda::bias_backward(dbias, engine::reshape(a, {args.k, args.m}), stream);
}

}  // namespace anvil::ops::cuda

namespace anvil::ops::detail {

size_t gemm_plan_cache_size() { return cuda::plan_cache().size(); }
size_t gemm_bias_grad_fused_calls() { return cuda::fused_bias_grad_calls; }

}  // namespace anvil::ops::detail
