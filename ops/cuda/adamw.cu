// CUDA AdamW with f32 master weights and decoupled weight decay (math in ops/adamw.h):
//   g = grad * grad_scale;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2           (updated)
//   master -= lr * ((m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * master)   (updated)
//   param = cast(master)           (=, bf16/f16 round-to-nearest-even or f32; skipped when empty)
// One grid-stride kernel over the flat range; 16-byte vector accesses when every pointer is
// aligned for them, scalar otherwise (ZeRO shards may start at any element). Memory-bound:
// 4 f32 streams in, 3 out, plus the param copy.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/adamw.h"

namespace anvil::ops::cuda {
namespace {

using engine::DType;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond ~3 waves of an H200

// Per-step scalars, bias corrections precomputed on the host in double. device_scale: null, or
// step_scale's {grad_scale, skip, norm}, read by every thread (replaces grad_scale).
struct AdamWScalars {
  float lr, beta1, beta2, eps, weight_decay, grad_scale, bias_correction1, bias_correction2;
  const float* device_scale;
};

// One element, in the same operation order as the CPU twin. Returns the new master weight.
__device__ __forceinline__ float adamw_one(const AdamWScalars& s, float grad, float& master,
                                           float& m, float& v) {
  const float g = grad * s.grad_scale;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float mhat = m / s.bias_correction1;
  const float vhat = v / s.bias_correction2;
  master -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.weight_decay * master);
  return master;
}

__device__ __forceinline__ void store_param(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_param(__nv_bfloat16* p, float x) {
  *p = __float2bfloat16_rn(x);
}
__device__ __forceinline__ void store_param(__half* p, float x) { *p = __float2half_rn(x); }
// 4 consecutive params from 4 master weights: 16 bytes of f32 or 8 bytes of bf16/f16.
__device__ __forceinline__ void store_param4(float* p, const float4& w) {
  *reinterpret_cast<float4*>(p) = w;
}
__device__ __forceinline__ void store_param4(__nv_bfloat16* p, const float4& w) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(w.x, w.y);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(w.z, w.w);
  uint2 raw;
  memcpy(&raw.x, &lo, 4);
  memcpy(&raw.y, &hi, 4);
  *reinterpret_cast<uint2*>(p) = raw;
}
__device__ __forceinline__ void store_param4(__half* p, const float4& w) {
  const __half2 lo = __floats2half2_rn(w.x, w.y);
  const __half2 hi = __floats2half2_rn(w.z, w.w);
  uint2 raw;
  memcpy(&raw.x, &lo, 4);
  memcpy(&raw.y, &hi, 4);
  *reinterpret_cast<uint2*>(p) = raw;
}

// master, m, v, grad: [n] f32; param: [n] P or null. kVec4: the launcher checked that master,
// m, v, grad are 16-byte and param 16-byte (f32) / 8-byte (bf16, f16) aligned; the n % 4 tail is
// done with scalar accesses.
template <typename P, bool kVec4>
__global__ void __launch_bounds__(kThreads)
    adamw_grid_stride(float* __restrict__ master, float* __restrict__ m, float* __restrict__ v,
                      P* __restrict__ param, const float* __restrict__ grad, int64_t n,
                      AdamWScalars s) {
  if (s.device_scale != nullptr) {
    if (s.device_scale[1] != 0.0f) return;  // skipped step: nothing changes
    s.grad_scale = s.device_scale[0];
  }
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t scalar_begin = 0;
  if constexpr (kVec4) {
    const int64_t n4 = n / 4;
    for (int64_t i = tid; i < n4; i += stride) {
      float4 w = reinterpret_cast<const float4*>(master)[i];
      float4 mm = reinterpret_cast<const float4*>(m)[i];
      float4 vv = reinterpret_cast<const float4*>(v)[i];
      const float4 g = reinterpret_cast<const float4*>(grad)[i];
      adamw_one(s, g.x, w.x, mm.x, vv.x);
      adamw_one(s, g.y, w.y, mm.y, vv.y);
      adamw_one(s, g.z, w.z, mm.z, vv.z);
      adamw_one(s, g.w, w.w, mm.w, vv.w);
      reinterpret_cast<float4*>(master)[i] = w;
      reinterpret_cast<float4*>(m)[i] = mm;
      reinterpret_cast<float4*>(v)[i] = vv;
      if (param != nullptr) store_param4(param + 4 * i, w);
    }
    scalar_begin = n4 * 4;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {
    float w = master[i], mm = m[i], vv = v[i];
    adamw_one(s, grad[i], w, mm, vv);
    master[i] = w;
    m[i] = mm;
    v[i] = vv;
    if (param != nullptr) store_param(param + i, w);
  }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename P>
void launch(const AdamWScalars& s, float* master, float* m, float* v, P* param, const float* grad,
            int64_t n, cudaStream_t stream) {
  const bool vec4 = aligned(master, 16) && aligned(m, 16) && aligned(v, 16) && aligned(grad, 16) &&
                    (param == nullptr || aligned(param, 4 * sizeof(P)));
  const int64_t work = vec4 ? (n + 3) / 4 : n;
  const int64_t blocks =
      std::min<int64_t>(std::max<int64_t>((work + kThreads - 1) / kThreads, 1), kMaxBlocks);
  if (vec4) {
    adamw_grid_stride<P, true>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(master, m, v, param, grad, n, s);
  } else {
    adamw_grid_stride<P, false>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(master, m, v, param, grad, n, s);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                  TensorView param, ConstTensorView grad, Stream& stream) {
  const int64_t n = master.numel();
  if (n == 0) return;
  const double t = static_cast<double>(args.step);
  const AdamWScalars s{args.lr,
                       args.beta1,
                       args.beta2,
                       args.eps,
                       args.weight_decay,
                       args.grad_scale,
                       static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta1), t)),
                       static_cast<float>(1.0 - std::pow(static_cast<double>(args.beta2), t)),
                       args.device_scale.empty() ? nullptr : args.device_scale.as<float>()};
  float* w = master.as<float>();
  const float* g = grad.as<float>();
  cudaStream_t cs = stream.cuda_stream();
  if (param.empty()) {
    launch<float>(s, w, m.as<float>(), v.as<float>(), nullptr, g, n, cs);
    return;
  }
  switch (param.dtype) {
    case DType::kF32:
      launch<float>(s, w, m.as<float>(), v.as<float>(), param.as<float>(), g, n, cs);
      break;
    case DType::kBF16:
      launch<__nv_bfloat16>(s, w, m.as<float>(), v.as<float>(),
                            static_cast<__nv_bfloat16*>(param.data), g, n, cs);
      break;
    case DType::kF16:
      launch<__half>(s, w, m.as<float>(), v.as<float>(), static_cast<__half*>(param.data), g, n,
                     cs);
      break;
    default:
      ANVIL_CHECK_MSG(false, "adamw_update (cuda): param must be bf16, f16, f32 or empty, got " +
                                 std::string(engine::dtype_name(param.dtype)));
  }
}

}  // namespace anvil::ops::cuda
