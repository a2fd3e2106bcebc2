// CPU twin of the deterministic parameter initialization (reference for the CUDA kernel):
//   kNormal    dst[j] = (float)(sigma * N(seed, offset + tp_whole_index(tp, first + j))), or 0
//              past `valid`;   kConstant  dst[j] = value   (=)
// N in double with glibc's log/cos (ops/init_normal.h); the f32 value is stored in dst's dtype
// (f64 holds the f32 value exactly; bf16/f16 round to nearest even from f32). Large calls are
// split over threads (the values do not depend on the split).
#include "ops/init_normal.h"

#include <algorithm>
#include <thread>
#include <type_traits>
#include <vector>

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

// fill over up to hardware_concurrency threads, each a contiguous range (every element's value
// depends on its index only, so the split changes no bit). Large calls only: the host master
// of an offloaded optimizer (model/sync_layout.h) holds every parameter of the rank, billions of
// elements at ~70 ns each (measured on a 2-core development machine).
template <typename T>
void fill_threaded(const InitNormalArgs& args, T* dst, int64_t n) {
  constexpr int64_t kPerThread = int64_t{1} << 20;
  const int64_t threads =
      std::clamp<int64_t>(n / kPerThread, 1, std::max(1u, std::thread::hardware_concurrency()));
  auto run = [&](int64_t k) {
    const int64_t j0 = n * k / threads, j1 = n * (k + 1) / threads;
    InitNormalArgs part = args;
    part.first = args.first + j0;
    fill<T>(part, dst + j0, j1 - j0);
  };
  std::vector<std::thread> pool;
  for (int64_t k = 1; k < threads; ++k) pool.emplace_back(run, k);
  run(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace

void init_normal(const InitNormalArgs& args, TensorView dst, Stream& /*stream*/) {
  dispatch_float(dst.dtype, "cpu::init_normal", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_threaded<T>(args, dst.as<T>(), dst.numel());
  });
}

}  // namespace anvil::ops::cpu
