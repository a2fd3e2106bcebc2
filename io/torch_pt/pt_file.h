// .pt files as torch.save (zip serialization) writes them, read and written without Python:
//   <prefix>/data.pkl     the pickle (io/torch_pt/pickle.h), protocol 2
//   <prefix>/data/<key>   each storage's raw little-endian elements
//   <prefix>/version      "3\n"
// (torch 1.13 names <prefix> after the file's stem; later versions write "archive"; any single
// prefix is read). The zip container is Debian's libzip; entries are stored (uncompressed), as
// torch writes them, and a compressed one is read too. A file that is not a zip (a truncated
// one has no end-of-central-directory record), has no data.pkl, or whose pickle or storages
// do not hold together is refused naming the file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/torch_pt/value.h"

namespace anvil::io::torch_pt {

class PtFile {
 public:
  static absl::StatusOr<PtFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  const ValuePtr& root() const { return root_; }

  // A tensor's elements in C order, converted to f32: float32, float16, bfloat16 and float64
  // storages only (another dtype is an error naming `what`, the file and the dtype); a
  // non-contiguous view is gathered by its strides.
  absl::StatusOr<std::vector<float>> read_f32(const TensorRef& t, const std::string& what) const;
  // The raw bytes of a storage (its whole record, checked against numel x element size).
  absl::StatusOr<std::string> storage_bytes(const TensorRef& t) const;

 private:
  struct Zip;
  std::string path_;
  std::string prefix_;
  ValuePtr root_;
  std::shared_ptr<Zip> zip_;
  mutable std::map<std::string, std::string> cache_;
};

// Builds a .pt file: tensors are added as storages (one per tensor, C order) and referenced
// from a value tree.
class PtWriter {
 public:
  // A contiguous tensor of `shape` from raw little-endian bytes of `dtype`.
  ValuePtr add_tensor(DType dtype, const std::vector<int64_t>& shape, std::string bytes);
  ValuePtr add_f32(const std::vector<int64_t>& shape, const std::vector<float>& values);
  // Writes the zip (stored entries, fixed timestamps: the same tree gives the same bytes).
  absl::Status write(const std::string& path, const Value& root) const;

 private:
  std::vector<std::string> storages_;
};

}  // namespace anvil::io::torch_pt
