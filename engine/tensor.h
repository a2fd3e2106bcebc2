// TensorView: a non-owning, trivially copyable view {data, dtype, device, shape[<=4], strides}.
// Strides are in elements. Nothing but an Arena owns memory; everything else passes views.
// ConstTensorView is the read-only twin; a TensorView converts to it implicitly.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "engine/device.h"
#include "engine/dtype.h"

namespace anvil::engine {

inline constexpr int kMaxDims = 4;

template <typename Ptr>
struct BasicTensorView {
  Ptr data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  int64_t shape[kMaxDims] = {0, 0, 0, 0};
  int64_t strides[kMaxDims] = {0, 0, 0, 0};

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? i + ndim : i]; }
  bool is_contiguous() const {
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  }
  template <typename T>
  auto as() const {
    if constexpr (std::is_const_v<std::remove_pointer_t<Ptr>>) {
      return static_cast<const T*>(data);
    } else {
      return static_cast<T*>(data);
    }
  }
};

using TensorView = BasicTensorView<void*>;

struct ConstTensorView : BasicTensorView<const void*> {
  ConstTensorView() = default;
  ConstTensorView(const BasicTensorView<const void*>& v) : BasicTensorView<const void*>(v) {}
  ConstTensorView(const TensorView& v) {  // NOLINT: implicit by design
    data = v.data;
    dtype = v.dtype;
    device = v.device;
    ndim = v.ndim;
    for (int i = 0; i < kMaxDims; ++i) {
      shape[i] = v.shape[i];
      strides[i] = v.strides[i];
    }
  }
};

// A contiguous view of `shape` over `data`.
TensorView make_view(void* data, DType dtype, Device device, std::initializer_list<int64_t> shape);
ConstTensorView make_view(const void* data, DType dtype, Device device,
                          std::initializer_list<int64_t> shape);

// The same memory seen with another contiguous shape of equal numel (CHECKed).
TensorView reshape(TensorView v, std::initializer_list<int64_t> shape);
ConstTensorView reshape(ConstTensorView v, std::initializer_list<int64_t> shape);

// Rows [begin, end) of the leading dimension; the view stays contiguous if v was.
TensorView slice_rows(TensorView v, int64_t begin, int64_t end);
ConstTensorView slice_rows(ConstTensorView v, int64_t begin, int64_t end);

// Columns [begin, end) of a 2-D view: shape [rows, end - begin], the row stride kept (so a
// column block of a contiguous matrix is a strided view).
TensorView slice_cols(TensorView v, int64_t begin, int64_t end);
ConstTensorView slice_cols(ConstTensorView v, int64_t begin, int64_t end);
// "bf16[4, 8] cuda" for error messages.
std::string describe(const ConstTensorView& v);

}  // namespace anvil::engine
