// safetensors files (Hugging Face's format), read and written without the Python library:
//   u64 LE header length N | N bytes of JSON header | raw little-endian tensor data
// The header maps each tensor name to {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}
// (byte offsets into the data section); an optional "__metadata__" entry maps strings to
// strings. The writer pads the header with spaces to a multiple of 8 bytes (as the Python
// library does), writes tensors in the given order, fsyncs the file and returns its CRC-32C.
// The reader checks the whole header against the file size before anything is read, so a
// truncated or corrupt file is an error naming the file, never garbage.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

// The dtypes anvil reads and writes; names as in safetensors ("F32", "BF16", ...).
enum class StDType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

const char* st_dtype_name(StDType t);
size_t st_dtype_size(StDType t);

struct StTensorInfo {
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range in the data section
  int64_t numel() const;
};

// A tensor to write: `data` points at prod(shape) elements of `dtype`, little-endian.
struct StTensorRef {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

struct StWriteResult {
  int64_t bytes = 0;    // file size
  uint32_t crc32c = 0;  // of the whole file
};

// Writes `tensors` (distinct names, not "__metadata__") to `path` and fsyncs it.
absl::StatusOr<StWriteResult> write_safetensors(const std::string& path,
                                                const std::vector<StTensorRef>& tensors,
                                                const std::map<std::string, std::string>& metadata);

class SafetensorsFile {
 public:
  // NotFound when missing; DataLoss naming the file for a bad header (length past the end,
  // invalid JSON, unknown dtype, data_offsets not matching the shape or past the end).
  static absl::StatusOr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, StTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // NotFound naming the file when the tensor is absent.
  absl::StatusOr<StTensorInfo> info(const std::string& name) const;
  // The raw bytes of a tensor.
  absl::StatusOr<std::vector<char>> read_bytes(const std::string& name) const;
  // A floating-point tensor (F64, F32, F16, BF16) converted to f32; InvalidArgument otherwise.
  absl::StatusOr<std::vector<float>> read_f32(const std::string& name) const;

 private:
  std::string path_;
  int64_t data_start_ = 0;  // 8 + header length
  std::map<std::string, StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace anvil::io
