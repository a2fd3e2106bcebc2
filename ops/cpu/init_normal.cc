// CPU twin of the deterministic parameter initialization (reference for the CUDA kernel):
//   kNormal    dst[j] = (float)(sigma * N(seed, offset + tp_whole_index(tp, first + j))), or 0
//              past `valid`;   kConstant  dst[j] = value   (=)
// N in double with glibc's log/cos (ops/init_normal.h); the f32 value is stored in dst's dtype
// (f64 holds the f32 value exactly; bf16/f16 round to nearest even from f32).
#include "ops/init_normal.h"

#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

// dst: [n] T.
template <typename T>
void fill(const InitNormalArgs& args, T* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    float v = args.value;
    if (args.kind == InitKind::kNormal) {
      const int64_t w = tp_whole_index(args.tp, args.first + j);
      v = w < args.valid ? static_cast<float>(
                               args.sigma * init_normal_sample(
                                                args.seed, args.offset + static_cast<uint64_t>(w)))
                         : 0.0f;
    }
    store(dst, j, v);
  }
}

}  // namespace

void init_normal(const InitNormalArgs& args, TensorView dst, Stream& /*stream*/) {
  dispatch_float(dst.dtype, "cpu::init_normal", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill<T>(args, dst.as<T>(), dst.numel());
  });
}

}  // namespace anvil::ops::cpu
