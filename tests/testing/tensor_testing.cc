// Implementation of the shared test helpers (see tensor_testing.h).
#include "tests/testing/tensor_testing.h"

#include <cmath>
#include <random>
#include <sstream>

#include "engine/cuda_check.h"
#include "engine/device.h"
#include "engine/memory.h"

namespace anvil::testing {
namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;

engine::Stream& host_stream() {
  static engine::Stream s = engine::Stream::cpu();
  return s;
}

// Host staging: converts between f32/f64/i32 host vectors and a tensor's dtype.
std::vector<uint8_t> encode(const std::vector<double>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * engine::dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    void* p = out.data() + i * engine::dtype_size(dtype);
    switch (dtype) {
      case DType::kF32: {
        float f = static_cast<float>(x);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kF64:
        std::memcpy(p, &x, 8);
        break;
      case DType::kBF16: {
        uint16_t b = engine::f32_to_bf16(static_cast<float>(x));
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kF16: {
        uint16_t b = engine::f32_to_f16(static_cast<float>(x));
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kI32: {
        int32_t v = static_cast<int32_t>(x);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kI64: {
        int64_t v = static_cast<int64_t>(x);
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kU16: {
        uint16_t v = static_cast<uint16_t>(x);
        std::memcpy(p, &v, 2);
        break;
      }
      case DType::kU8: {
        uint8_t v = static_cast<uint8_t>(x);
        std::memcpy(p, &v, 1);
        break;
      }
    }
  }
  return out;
}

double decode_one(const uint8_t* p, DType dtype) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return engine::bf16_to_f32(b);
    }
    case DType::kF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return engine::f16_to_f32(b);
    }
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::kU16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kU8:
      return *p;
  }
  return 0;
}

std::vector<uint8_t> raw_bytes(ConstTensorView v) {
  EXPECT_TRUE(v.is_contiguous()) << engine::describe(v);
  std::vector<uint8_t> host(v.bytes());
  if (host.empty()) return host;
  if (v.device == Device::kCuda) {
    ANVIL_CUDA_CHECK(cudaDeviceSynchronize());
    ANVIL_CUDA_CHECK(cudaMemcpy(host.data(), v.data, host.size(), cudaMemcpyDeviceToHost));
  } else {
    std::memcpy(host.data(), v.data, host.size());
  }
  return host;
}

TensorView upload(TensorPool& pool, const std::vector<uint8_t>& bytes, DType dtype,
                  std::vector<int64_t> shape) {
  TensorView t = pool.empty(dtype, std::move(shape));
  EXPECT_EQ(t.bytes(), bytes.size());
  if (t.device == Device::kCuda) {
    ANVIL_CUDA_CHECK(cudaMemcpy(t.data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    // A pageable host-to-device cudaMemcpy may return before its DMA lands, and ops run on
    // non-blocking streams that do not order after the legacy stream: wait for it here.
    ANVIL_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    std::memcpy(t.data, bytes.data(), bytes.size());
  }
  return t;
}

}  // namespace

bool gpu_available() { return engine::cuda_device_count() > 0; }

TestStream::TestStream(Device device) {
  if (device == Device::kCpu) {
    stream_ = std::make_unique<engine::Stream>(engine::Stream::cpu());
    return;
  }
  auto s = engine::Stream::cuda(0);
  ANVIL_CHECK_OK(s.status());
  stream_ = std::make_unique<engine::Stream>(std::move(s).value());
  auto arena = engine::Arena::create(Device::kCuda, kGemmWorkspaceBytes, "test gemm workspace");
  ANVIL_CHECK_OK(arena.status());
  workspace_arena_ = std::move(arena).value();
  auto ws = workspace_arena_.allocate_workspace(kGemmWorkspaceBytes, "cublaslt");
  ANVIL_CHECK_OK(ws.status());
  stream_->set_gemm_workspace(*ws);
}

TensorView TensorPool::empty(DType dtype, std::vector<int64_t> shape) {
  const size_t bytes = engine::arena_bytes(dtype, shape);
  auto arena = engine::Arena::create(device_, bytes, "test tensor");
  ANVIL_CHECK_OK(arena.status());
  arenas_.push_back(std::make_unique<engine::Arena>(std::move(arena).value()));
  auto v = arenas_.back()->allocate(dtype, shape, "test tensor");
  ANVIL_CHECK_OK(v.status());
  engine::poison(*v, host_stream());
  if (device_ == Device::kCuda) ANVIL_CUDA_CHECK(cudaDeviceSynchronize());
  return *v;
}

TensorView TensorPool::from(const std::vector<float>& values, DType dtype,
                            std::vector<int64_t> shape) {
  return upload(*this, encode(std::vector<double>(values.begin(), values.end()), dtype), dtype,
                std::move(shape));
}

TensorView TensorPool::from_f64(const std::vector<double>& values, std::vector<int64_t> shape) {
  return upload(*this, encode(values, DType::kF64), DType::kF64, std::move(shape));
}

TensorView TensorPool::from_i32(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return upload(*this, bytes, DType::kI32, std::move(shape));
}

engine::Workspace TensorPool::workspace(size_t bytes) {
  if (bytes == 0) return {};
  TensorView v = empty(DType::kU8, {static_cast<int64_t>(bytes)});
  return engine::Workspace{v.data, bytes};
}

std::vector<float> random_uniform(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> random_ints(int64_t n, uint64_t seed, int32_t lo, int32_t hi_exclusive) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi_exclusive - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = engine::round_to_bf16(x);
  return v;
}

std::vector<double> to_host_f64(ConstTensorView v) {
  const std::vector<uint8_t> bytes = raw_bytes(v);
  const size_t es = engine::dtype_size(v.dtype);
  std::vector<double> out(v.numel());
  for (size_t i = 0; i < out.size(); ++i) out[i] = decode_one(bytes.data() + i * es, v.dtype);
  return out;
}

std::vector<float> to_host(ConstTensorView v) {
  const std::vector<double> d = to_host_f64(v);
  return std::vector<float>(d.begin(), d.end());
}

std::vector<int32_t> to_host_i32(ConstTensorView v) {
  const std::vector<double> d = to_host_f64(v);
  std::vector<int32_t> out(d.size());
  for (size_t i = 0; i < d.size(); ++i) out[i] = static_cast<int32_t>(d[i]);
  return out;
}

::testing::AssertionResult tensors_near(const std::vector<double>& got,
                                        const std::vector<double>& ref, Tol tol,
                                        bool allow_zero_ref) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure()
           << "size mismatch: got " << got.size() << " ref " << ref.size();
  }
  double err2 = 0, ref2 = 0, max_err = 0;
  size_t max_i = 0, bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], r = ref[i];
    const double e = std::fabs(g - r);
    const bool ok = std::isfinite(g) && std::isfinite(r) && e <= tol.atol + tol.rtol * std::fabs(r);
    if (!ok) {
      if (bad < 5) first << "  [" << i << "] got " << g << " ref " << r << "\n";
      ++bad;
    }
    if (!(e <= max_err)) {  // NaN counts as the worst
      max_err = std::isfinite(e) ? e : INFINITY;
      max_i = i;
    }
    err2 += e * e;
    ref2 += r * r;
  }
  const double nmse = ref2 > 0 ? err2 / ref2 : err2;
  if (bad == 0 && nmse <= tol.max_nmse && (allow_zero_ref || ref2 > 0)) {
    return ::testing::AssertionSuccess();
  }
  auto f = ::testing::AssertionFailure();
  f << bad << " of " << got.size() << " elements out of tolerance (atol " << tol.atol << ", rtol "
    << tol.rtol << "); max err " << max_err << " at " << max_i << "; nmse " << nmse << " (max "
    << tol.max_nmse << ")";
  if (ref2 == 0 && !allow_zero_ref) f << "; reference is all zero";
  f << "\n" << first.str();
  return f;
}

::testing::AssertionResult tensors_near(const std::vector<float>& got,
                                        const std::vector<float>& ref, Tol tol,
                                        bool allow_zero_ref) {
  return tensors_near(std::vector<double>(got.begin(), got.end()),
                      std::vector<double>(ref.begin(), ref.end()), tol, allow_zero_ref);
}

std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x, double h) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

}  // namespace anvil::testing
