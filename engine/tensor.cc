// View construction, reshaping and slicing; all CHECK their preconditions.
#include "engine/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"

namespace anvil::engine {
namespace {

template <typename View>
void set_contiguous_shape(View& v, std::initializer_list<int64_t> shape) {
  ANVIL_CHECK_MSG(shape.size() <= kMaxDims, "at most 4 dims");
  v.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) v.shape[i++] = s;
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.strides[d] = stride;
    stride *= v.shape[d];
  }
}

template <typename View>
View reshape_impl(View v, std::initializer_list<int64_t> shape) {
  ANVIL_CHECK_MSG(v.is_contiguous(), "reshape of a non-contiguous view " + describe(v));
  const int64_t before = v.numel();
  set_contiguous_shape(v, shape);
  ANVIL_CHECK_MSG(v.numel() == before,
                  absl::StrCat("reshape changes numel: ", before, " -> ", v.numel()));
  return v;
}

template <typename View>
View slice_rows_impl(View v, int64_t begin, int64_t end) {
  ANVIL_CHECK_MSG(v.ndim >= 1 && 0 <= begin && begin <= end && end <= v.shape[0],
                  absl::StrCat("slice_rows [", begin, ", ", end, ") of ", describe(v)));
  using Byte = std::conditional_t<std::is_same_v<View, TensorView>, char, const char>;
  v.data = static_cast<Byte*>(v.data) + begin * v.strides[0] * dtype_size(v.dtype);
  v.shape[0] = end - begin;
  return v;
}

template <typename View>
View slice_cols_impl(View v, int64_t begin, int64_t end) {
  ANVIL_CHECK_MSG(v.ndim == 2 && 0 <= begin && begin <= end && end <= v.shape[1],
                  absl::StrCat("slice_cols [", begin, ", ", end, ") of ", describe(v)));
  using Byte = std::conditional_t<std::is_same_v<View, TensorView>, char, const char>;
  v.data = static_cast<Byte*>(v.data) + begin * v.strides[1] * dtype_size(v.dtype);
  v.shape[1] = end - begin;
  return v;
}

}  // namespace

TensorView make_view(void* data, DType dtype, Device device, std::initializer_list<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  set_contiguous_shape(v, shape);
  return v;
}

ConstTensorView make_view(const void* data, DType dtype, Device device,
                          std::initializer_list<int64_t> shape) {
  ConstTensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  set_contiguous_shape(v, shape);
  return v;
}

TensorView reshape(TensorView v, std::initializer_list<int64_t> shape) {
  return reshape_impl(v, shape);
}
ConstTensorView reshape(ConstTensorView v, std::initializer_list<int64_t> shape) {
  return reshape_impl(v, shape);
}
TensorView slice_rows(TensorView v, int64_t begin, int64_t end) {
  return slice_rows_impl(v, begin, end);
}
ConstTensorView slice_rows(ConstTensorView v, int64_t begin, int64_t end) {
  return slice_rows_impl(v, begin, end);
}

TensorView slice_cols(TensorView v, int64_t begin, int64_t end) {
  return slice_cols_impl(v, begin, end);
}
ConstTensorView slice_cols(ConstTensorView v, int64_t begin, int64_t end) {
  return slice_cols_impl(v, begin, end);
}

std::string describe(const ConstTensorView& v) {
  std::vector<int64_t> dims(v.shape, v.shape + v.ndim);
  return absl::StrCat(std::string(dtype_name(v.dtype)), "[", absl::StrJoin(dims, ", "), "] ",
                      std::string(device_name(v.device)), v.data ? "" : " (empty)");
}

}  // namespace anvil::engine
