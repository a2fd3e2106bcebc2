// numpy .npy files of integer arrays (the index caches Megatron's datasets write with np.save
// and read with np.load(mmap_mode='r')), both ways:
//   "\x93NUMPY" | u8 major | u8 minor | header length (u16 for 1.0, u32 for 2.0/3.0)
//   | header: a Python dict literal {'descr': '<i4', 'fortran_order': False, 'shape': (n, 2), }
//     padded with spaces and ended by '\n' so the data starts at a multiple of 64 bytes
//   | data: C order, little-endian.
// write_npy writes version 1.0 exactly as numpy 1.24's np.save does, to a temporary name that is
// renamed into place (a reader never sees half a file; concurrent writers of the same content are
// safe). NpyArray::open memory-maps a file and validates magic, header, dtype and that the file
// holds exactly prod(shape) elements, so a truncated or corrupt file is an error, never garbage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

// The integer dtypes the index caches use ('<i4', '<u4', '<i8', '<u8', '|u1').
enum class NpyDType { kI32, kU32, kI64, kU64, kU8 };

const char* npy_descr(NpyDType t);
size_t npy_itemsize(NpyDType t);

// Writes a C-order array of `shape` (elements of `dtype` at `data`) to `path` atomically.
absl::Status write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape,
                       const void* data);

// An immutable integer array: a memory-mapped .npy file or an owned buffer. Copies share the
// storage. Elements are read widened to int64 (u64 values above INT64_MAX are not supported).
class NpyArray {
 public:
  NpyArray() = default;
  // NotFound when the file is missing; DataLoss naming the file and the problem otherwise.
  static absl::StatusOr<NpyArray> open(const std::string& path);
  // Takes ownership of `values`, whose element type must match `dtype` (CHECKed by size).
  template <typename T>
  static NpyArray from_vector(NpyDType dtype, std::vector<int64_t> shape, std::vector<T> values) {
    auto owned = std::make_shared<const std::vector<T>>(std::move(values));
    const void* data = owned->data();
    const int64_t count = static_cast<int64_t>(owned->size());
    return wrap(dtype, std::move(shape), count, sizeof(T), data, std::move(owned));
  }

  NpyDType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const { return size_; }
  const void* data() const { return data_; }
  // Element i of the flattened array.
  int64_t operator[](int64_t i) const {
    switch (dtype_) {
      case NpyDType::kI32:
        return static_cast<const int32_t*>(data_)[i];
      case NpyDType::kU32:
        return static_cast<const uint32_t*>(data_)[i];
      case NpyDType::kI64:
        return static_cast<const int64_t*>(data_)[i];
      case NpyDType::kU64:
        return static_cast<int64_t>(static_cast<const uint64_t*>(data_)[i]);
      case NpyDType::kU8:
        return static_cast<const uint8_t*>(data_)[i];
    }
    return 0;
  }
  // Writes this array to `path` (write_npy).
  absl::Status save(const std::string& path) const;

 private:
  // CHECKs that prod(shape) == count and itemsize matches dtype.
  static NpyArray wrap(NpyDType dtype, std::vector<int64_t> shape, int64_t count, size_t itemsize,
                       const void* data, std::shared_ptr<const void> owner);

  std::shared_ptr<const void> storage_;  // keeps the mmap or the owned vector alive
  NpyDType dtype_ = NpyDType::kI64;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  const void* data_ = nullptr;
};

}  // namespace anvil::io
