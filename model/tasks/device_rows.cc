// read_rows / write_rows (see device_rows.h): per-row copies and the dtype conversions.
#include "model/tasks/device_rows.h"

#include <cstring>

#include "engine/dtype.h"
#include "engine/memory.h"

namespace anvil::model {
namespace {

double element(const char* p, engine::DType t) {
  switch (t) {
    case engine::DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return engine::bf16_to_f32(b);
    }
    case engine::DType::kF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return engine::f16_to_f32(b);
    }
    case engine::DType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

void store(char* p, engine::DType t, double v) {
  switch (t) {
    case engine::DType::kBF16: {
      const uint16_t b = engine::f32_to_bf16(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      return;
    }
    case engine::DType::kF16: {
      const uint16_t b = engine::f32_to_f16(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      return;
    }
    case engine::DType::kF64:
      std::memcpy(p, &v, 8);
      return;
    default: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    }
  }
}

}  // namespace

std::vector<double> read_rows(engine::ConstTensorView x, const std::vector<int64_t>& rows,
                              engine::Stream& s) {
  const int64_t cols = x.shape[1];
  const size_t es = engine::dtype_size(x.dtype), bytes = static_cast<size_t>(cols) * es;
  std::vector<char> raw(rows.size() * bytes);
  for (size_t i = 0; i < rows.size(); ++i) {
    engine::copy(
        engine::make_view(raw.data() + i * bytes, x.dtype, engine::Device::kCpu, {cols}),
        engine::make_view(static_cast<const char*>(x.data) + static_cast<size_t>(rows[i]) * bytes,
                          x.dtype, x.device, {cols}),
        s);
  }
  s.synchronize();
  std::vector<double> out(rows.size() * static_cast<size_t>(cols));
  for (size_t i = 0; i < out.size(); ++i) out[i] = element(raw.data() + i * es, x.dtype);
  return out;
}

void write_rows(engine::TensorView x, const std::vector<int64_t>& rows,
                const std::vector<double>& v, engine::Stream& s) {
  const int64_t cols = x.shape[1];
  const size_t es = engine::dtype_size(x.dtype), bytes = static_cast<size_t>(cols) * es;
  std::vector<char> raw(v.size() * es);
  for (size_t i = 0; i < v.size(); ++i) store(raw.data() + i * es, x.dtype, v[i]);
  engine::fill_zero(x, s);
  for (size_t i = 0; i < rows.size(); ++i) {
    engine::copy(
        engine::make_view(static_cast<char*>(x.data) + static_cast<size_t>(rows[i]) * bytes,
                          x.dtype, x.device, {cols}),
        engine::make_view(raw.data() + i * bytes, x.dtype, engine::Device::kCpu, {cols}), s);
  }
  s.synchronize();  // raw is freed on return
}

}  // namespace anvil::model
