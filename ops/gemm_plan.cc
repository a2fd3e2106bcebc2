// Key of the cuBLASLt plan cache (see ops/gemm_plan.h): construction, equality and hash.
#include "ops/gemm_plan.h"

#include <tuple>

namespace anvil::ops::detail {
namespace {

// All fields as one tuple, so == and the hash cannot forget one.
auto fields(const GemmPlanKey& k) {
  return std::make_tuple(k.m, k.n, k.k, k.batch, k.stride_a, k.stride_b, k.stride_d,
                         k.workspace_bytes, k.device, static_cast<int>(k.ab), static_cast<int>(k.d),
                         static_cast<int>(k.epilogue), k.trans_a, k.trans_b, k.beta_zero, k.align_a,
                         k.align_b, k.align_d, k.align_bias, k.align_aux);
}

// 64-bit FNV-1a style mixing of one value into h.
void mix(uint64_t& h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0x100000001b3ull;
}

}  // namespace

bool GemmPlanKey::operator==(const GemmPlanKey& o) const { return fields(*this) == fields(o); }

size_t GemmPlanKeyHash::operator()(const GemmPlanKey& key) const {
  uint64_t h = 0xcbf29ce484222325ull;
  std::apply([&h](auto... v) { (mix(h, static_cast<uint64_t>(v)), ...); }, fields(key));
  return static_cast<size_t>(h);
}

uint32_t gemm_alignment_bytes(const void* p, int64_t stride_elems, size_t elem_bytes,
                              int64_t batch) {
  uint64_t bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  uint32_t align = 256;
  while (align > 1 && bits % align != 0) align >>= 1;
  return align;
}

GemmPlanKey gemm_plan_key(const GemmArgs& args, Epilogue epilogue, engine::DType ab_dtype,
                          engine::DType d_dtype, const void* a, const void* b, const void* d,
                          const void* bias, const void* aux, uint64_t workspace_bytes, int device) {
  GemmPlanKey key;
  key.m = args.m;
  key.n = args.n;
  key.k = args.k;
  key.batch = args.batch;
  key.stride_a = args.stride_a ? args.stride_a : args.m * args.k;
  key.stride_b = args.stride_b ? args.stride_b : args.k * args.n;
  key.stride_d = args.stride_d ? args.stride_d : args.m * args.n;
  key.workspace_bytes = workspace_bytes;
  key.device = device;
  key.ab = ab_dtype;
  key.d = d_dtype;
  key.epilogue = epilogue;
  key.trans_a = args.trans_a;
  key.trans_b = args.trans_b;
  key.beta_zero = args.beta == 0.0f;
  const size_t ab_bytes = engine::dtype_size(ab_dtype), d_bytes = engine::dtype_size(d_dtype);
  key.align_a = gemm_alignment_bytes(a, key.stride_a, ab_bytes, args.batch);
  key.align_b = gemm_alignment_bytes(b, key.stride_b, ab_bytes, args.batch);
  key.align_d = gemm_alignment_bytes(d, key.stride_d, d_bytes, args.batch);
  // Epilogues run with batch == 1: only the addresses count.
  key.align_bias = gemm_alignment_bytes(bias, 0, ab_bytes, 1);
  key.align_aux = gemm_alignment_bytes(aux, 0, ab_bytes, 1);
  return key;
}

}  // namespace anvil::ops::detail
