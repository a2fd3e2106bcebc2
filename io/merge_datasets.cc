// merge_datasets (io/preprocess.h): the streaming concatenation of indexed datasets into one,
// .bin blocks copied as they are, the .idx rebuilt from the inputs' sizes and documents;
// outputs written under temporary names and renamed into place when complete.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/file_checks.h"
#include "io/preprocess.h"
#include "io/temp_files.h"

namespace anvil::io {
namespace {

// .idx bytes in Megatron's layout (see io/indexed_dataset.h).
std::string index_bytes(TokenDType dtype, const std::vector<int32_t>& sizes,
                        const std::vector<int64_t>& doc_idx) {
  static constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
  const uint64_t version = 1, n = sizes.size(), d = doc_idx.size();
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype));
  std::string out;
  out.reserve(34 + 12 * n + 8 * d);
  out.append(kMagic, 9);
  out.append(reinterpret_cast<const char*>(&version), 8);
  out.push_back(static_cast<char>(dtype));
  out.append(reinterpret_cast<const char*>(&n), 8);
  out.append(reinterpret_cast<const char*>(&d), 8);
  out.append(reinterpret_cast<const char*>(sizes.data()), 4 * n);
  int64_t pointer = 0;
  for (const int32_t s : sizes) {
    out.append(reinterpret_cast<const char*>(&pointer), 8);
    pointer += s * item;
  }
  out.append(reinterpret_cast<const char*>(doc_idx.data()), 8 * d);
  return out;
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Removes temporary files unless released.
class TempFiles {
 public:
  ~TempFiles() {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  void add(const std::string& p) { paths_.push_back(p); }
  void release() { paths_.clear(); }

 private:
  std::vector<std::string> paths_;
};

}  // namespace

absl::StatusOr<MergeStats> merge_datasets(const std::vector<std::string>& inputs,
                                          const std::string& output_prefix,
                                          const std::function<bool()>& cancelled) {
  if (inputs.empty()) return absl::InvalidArgumentError("merge: no input datasets given");
  if (output_prefix.empty()) return absl::InvalidArgumentError("merge: no output prefix given");
  // Validate everything before writing anything: same dtype, contiguous .bin files.
  MergeStats stats;
  std::vector<int32_t> sizes;
  std::vector<int64_t> doc_idx{0};
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == output_prefix) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge: the output ", output_prefix, " is also an input"));
    }
    for (const char* ext : {".bin", ".idx"}) {
      ANVIL_RETURN_IF_ERROR(check_not_input(inputs[i] + ext, output_prefix + ext));
    }
    ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> ds, IndexedDataset::open(inputs[i]));
    if (i == 0) {
      stats.dtype = ds->dtype();
    } else if (ds->dtype() != stats.dtype) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "merge: %s has token dtype code %d but %s has %d; all inputs must have the same dtype",
          inputs[i], static_cast<int>(ds->dtype()), inputs[0], static_cast<int>(stats.dtype)));
    }
    const int64_t item = static_cast<int64_t>(token_dtype_size(ds->dtype()));
    int64_t expected = 0;
    for (int64_t q = 0; q < ds->num_sequences(); ++q) {
      if (ds->pointers()[q] != expected) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "merge: %s.idx: pointer of sequence %d is %d, expected %d (the .bin is not "
            "contiguous, it cannot be concatenated)",
            inputs[i], q, ds->pointers()[q], expected));
      }
      expected += ds->sizes()[q] * item;
    }
    struct stat st;
    const std::string bin = inputs[i] + ".bin";
    if (::stat(bin.c_str(), &st) != 0) {
      return absl::NotFoundError(errno_message(bin, "stat", errno));
    }
    if (static_cast<int64_t>(st.st_size) != expected) {
      return absl::InvalidArgumentError(
          absl::StrFormat("merge: %s is %d bytes but its index describes %d", bin,
                          static_cast<int64_t>(st.st_size), expected));
    }
    const int64_t offset = static_cast<int64_t>(sizes.size());
    sizes.insert(sizes.end(), ds->sizes().begin(), ds->sizes().end());
    for (size_t d = 1; d < ds->doc_idx().size(); ++d) doc_idx.push_back(offset + ds->doc_idx()[d]);
    stats.bytes += static_cast<uint64_t>(expected);
  }
  stats.sequences = static_cast<int64_t>(sizes.size());
  stats.documents = static_cast<int64_t>(doc_idx.size()) - 1;

  // Stream the .bin files into a temporary, write the index, then rename both into place.
  const std::string bin_path = output_prefix + ".bin", idx_path = output_prefix + ".idx";
  const std::string bin_tmp = temp_path(bin_path), idx_tmp = temp_path(idx_path);
  for (const std::string& path : {bin_path, idx_path}) {
    ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> removed, remove_stale_temps(path));
    stats.removed_temporaries.insert(stats.removed_temporaries.end(), removed.begin(),
                                     removed.end());
  }
  TempFiles temps;
  temps.add(bin_tmp);
  temps.add(idx_tmp);
  const int out = ::open(bin_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return absl::InternalError(errno_message(bin_tmp, "create", errno));
  std::vector<char> block(4 << 20);
  absl::Status status;
  for (const std::string& prefix : inputs) {
    const std::string bin = prefix + ".bin";
    const int in = ::open(bin.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) {
      status = absl::NotFoundError(errno_message(bin, "open", errno));
      break;
    }
    ::posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
    while (status.ok()) {
      if (cancelled && cancelled()) {
        status = absl::CancelledError("interrupted; the unfinished output was removed");
        break;
      }
      const ssize_t got = ::read(in, block.data(), block.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) status = absl::DataLossError(errno_message(bin, "read", errno));
      if (got <= 0) break;
      if (!write_all(out, block.data(), static_cast<size_t>(got))) {
        status = absl::InternalError(errno_message(bin_tmp, "write", errno));
      }
    }
    ::close(in);
    if (!status.ok()) break;
  }
  if (status.ok() && ::fsync(out) != 0) {
    status = absl::InternalError(errno_message(bin_tmp, "fsync", errno));
  }
  ::close(out);
  ANVIL_RETURN_IF_ERROR(status);

  const std::string idx = index_bytes(stats.dtype, sizes, doc_idx);
  const int fd = ::open(idx_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(errno_message(idx_tmp, "create", errno));
  const bool wrote = write_all(fd, idx.data(), idx.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!wrote) return absl::InternalError(errno_message(idx_tmp, "write", err));
  if (std::rename(bin_tmp.c_str(), bin_path.c_str()) != 0) {
    return absl::InternalError(errno_message(bin_path, "rename into place", errno));
  }
  if (std::rename(idx_tmp.c_str(), idx_path.c_str()) != 0) {
    return absl::InternalError(errno_message(idx_path, "rename into place", errno));
  }
  temps.release();
  return stats;
}

}  // namespace anvil::io
