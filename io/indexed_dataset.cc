// Megatron MMapIndexedDataset reader and writer (format: io/indexed_dataset.h, DESIGN.md §6).
// The reader maps prefix.idx, validates every field against the file sizes, copies the three
// index arrays out (they are unaligned in the file) and keeps prefix.bin mapped for read().
// The writer streams token bytes to a temporary .bin, keeps sizes/doc_idx in memory and writes
// the .idx at finish(), then renames both into place; its output is byte-identical to
// Megatron's numpy writer (tests/io/fixtures, scripts/make_idx_fixture.py).
#include "io/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/sigbus_guard.h"
#include "io/temp_files.h"

// The format is little-endian and we memcpy arrays straight out of the file.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "anvil assumes a little-endian host");

namespace anvil::io {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr char kLegacyMagic[8] = {'T', 'N', 'T', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, N, D

std::string errno_text(int err) { return std::strerror(err); }

// Maps an errno from open()/stat() to a Status naming the path.
absl::Status file_error(const std::string& path, const char* action, int err) {
  const std::string msg = absl::StrCat(path, ": cannot ", action, ": ", errno_text(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// A read-only mapping of a whole file; an empty file maps to {nullptr, 0}. fd is the open
// descriptor when map_file was asked to keep it, else -1.
struct Mapping {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  int fd = -1;
};

absl::StatusOr<Mapping> map_file(const std::string& path, bool keep_fd = false) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return file_error(path, "open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return file_error(path, "stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  Mapping m;
  m.bytes = static_cast<size_t>(st.st_size);
  if (m.bytes > 0) {
    void* p = ::mmap(nullptr, m.bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return file_error(path, "mmap", err);
    }
    m.data = static_cast<const uint8_t*>(p);
  }
  if (keep_fd) {
    m.fd = fd;
  } else {
    ::close(fd);  // the mapping stays valid without the descriptor
  }
  return m;
}

void unmap(const Mapping& m) {
  if (m.data != nullptr) ::munmap(const_cast<uint8_t*>(m.data), m.bytes);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool dtype_code_known(uint8_t code) { return code >= 1 && code <= 8; }

const char* dtype_label(TokenDType t) {
  switch (t) {
    case TokenDType::kU8:
      return "uint8";
    case TokenDType::kI8:
      return "int8";
    case TokenDType::kI16:
      return "int16";
    case TokenDType::kI32:
      return "int32";
    case TokenDType::kI64:
      return "int64";
    case TokenDType::kF64:
      return "float64";
    case TokenDType::kF32:
      return "float32";
    case TokenDType::kU16:
      return "uint16";
  }
  return "?";
}

// Copies `count` tokens of integer type T at `src` (unaligned) to i32 (open() refuses float
// token files).
template <typename T>
void widen(const uint8_t* src, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    const T v = load<T>(src + i * static_cast<int64_t>(sizeof(T)));
    if constexpr (sizeof(T) > 4) {
      ANVIL_CHECK_MSG(v >= static_cast<T>(std::numeric_limits<int32_t>::min()) &&
                          v <= static_cast<T>(std::numeric_limits<int32_t>::max()),
                      "IndexedDataset::read: token does not fit in int32");
    }
    out[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

TokenDType token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::kU16 : TokenDType::kI32;
}

size_t token_dtype_size(TokenDType t) {
  switch (t) {
    case TokenDType::kU8:
    case TokenDType::kI8:
      return 1;
    case TokenDType::kI16:
    case TokenDType::kU16:
      return 2;
    case TokenDType::kI32:
    case TokenDType::kF32:
      return 4;
    case TokenDType::kI64:
    case TokenDType::kF64:
      return 8;
  }
  return 0;
}

// ------------------------------------------------------------------------------------------
// Reader
// ------------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::open(const std::string& prefix) {
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  ANVIL_ASSIGN_OR_RETURN(const Mapping idx, map_file(idx_path));
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  // Parse and copy the index; the .idx mapping is released on every path out of this lambda.
  const absl::Status parsed = [&]() -> absl::Status {
    const uint8_t* p = idx.data;
    if (idx.bytes < kHeaderBytes) {
      if (idx.bytes >= 8 && std::memcmp(p, kLegacyMagic, 8) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            idx_path, ": legacy 'cached/lazy' (TNTIDX) index; only the mmap format is supported"));
      }
      return absl::DataLossError(
          absl::StrFormat("%s: truncated header: expected at least %d bytes, file has %d", idx_path,
                          kHeaderBytes, idx.bytes));
    }
    if (std::memcmp(p, kMagic, 9) != 0) {
      if (std::memcmp(p, kLegacyMagic, 8) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            idx_path, ": legacy 'cached/lazy' (TNTIDX) index; only the mmap format is supported"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          idx_path, ": bad magic (expected \"MMIDIDX\\0\\0\"): not a Megatron mmap index"));
    }
    const uint64_t version = load<uint64_t>(p + 9);
    if (version != kVersion) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: unsupported version %d (expected 1)", idx_path, version));
    }
    const uint8_t code = p[17];
    if (!dtype_code_known(code)) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: unknown dtype code %d (known: 1-8)",
                                                        idx_path, static_cast<int>(code)));
    }
    if (code == static_cast<uint8_t>(TokenDType::kF64) ||
        code == static_cast<uint8_t>(TokenDType::kF32)) {
      // Token ids are integers: a float file is another array (or a bug), and code 7 means
      // float64 in BigScience, float32 in NVIDIA.
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: dtype code %d is %s, but token ids are integers; rewrite the dataset with an "
          "integer dtype (bin/preprocess writes uint16 or int32)",
          idx_path, static_cast<int>(code),
          code == static_cast<uint8_t>(TokenDType::kF64)
              ? "float64"
              : "a float (float64 in BigScience, float32 in NVIDIA)"));
    }
    const uint64_t n = load<uint64_t>(p + 18);
    const uint64_t d = load<uint64_t>(p + 26);
    // Guard the size arithmetic against absurd counts before multiplying.
    constexpr uint64_t kMaxCount = uint64_t{1} << 56;
    if (n > kMaxCount || d > kMaxCount) {
      return absl::DataLossError(
          absl::StrFormat("%s: corrupt header: %d sequences, %d doc_idx entries", idx_path, n, d));
    }
    const uint64_t expected = kHeaderBytes + 12 * n + 8 * d;
    if (idx.bytes < expected) {
      return absl::DataLossError(absl::StrFormat(
          "%s: truncated: expected %d bytes for %d sequences and %d doc_idx entries, file has %d",
          idx_path, expected, n, d, idx.bytes));
    }
    if (idx.bytes > expected) {
      const bool modes = idx.bytes == expected + n;
      return absl::DataLossError(absl::StrFormat(
          "%s: size mismatch: expected %d bytes for %d sequences and %d doc_idx entries, file "
          "has %d%s",
          idx_path, expected, n, d, idx.bytes,
          modes ? " (the extra N bytes look like NVIDIA's multimodal sequence_modes, which is "
                  "not supported)"
                : ""));
    }
    if (d < 1) {
      return absl::DataLossError(
          absl::StrCat(idx_path, ": doc_idx is empty (expected at least the leading 0)"));
    }
    ds->dtype_ = static_cast<TokenDType>(code);
    ds->sizes_.resize(n);
    ds->pointers_.resize(n);
    ds->doc_idx_.resize(d);
    const uint8_t* sizes_at = p + kHeaderBytes;
    const uint8_t* pointers_at = sizes_at + 4 * n;
    const uint8_t* doc_idx_at = pointers_at + 8 * n;
    if (n > 0) {
      std::memcpy(ds->sizes_.data(), sizes_at, 4 * n);
      std::memcpy(ds->pointers_.data(), pointers_at, 8 * n);
    }
    std::memcpy(ds->doc_idx_.data(), doc_idx_at, 8 * d);

    if (ds->doc_idx_[0] != 0) {
      return absl::DataLossError(
          absl::StrFormat("%s: doc_idx[0] = %d, expected 0", idx_path, ds->doc_idx_[0]));
    }
    if (ds->doc_idx_[d - 1] != static_cast<int64_t>(n)) {
      return absl::DataLossError(absl::StrFormat("%s: doc_idx[%d] = %d, expected N = %d", idx_path,
                                                 d - 1, ds->doc_idx_[d - 1], n));
    }
    for (uint64_t i = 1; i < d; ++i) {
      if (ds->doc_idx_[i] < ds->doc_idx_[i - 1]) {
        return absl::DataLossError(
            absl::StrFormat("%s: doc_idx not monotonic: doc_idx[%d] = %d < doc_idx[%d] = %d",
                            idx_path, i, ds->doc_idx_[i], i - 1, ds->doc_idx_[i - 1]));
      }
    }
    const int64_t item = static_cast<int64_t>(token_dtype_size(ds->dtype_));
    int64_t tokens = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (ds->sizes_[i] < 0) {
        return absl::DataLossError(
            absl::StrFormat("%s: sizes[%d] = %d is negative", idx_path, i, ds->sizes_[i]));
      }
      if (i == 0 ? ds->pointers_[0] < 0
                 : ds->pointers_[i] != ds->pointers_[i - 1] + ds->sizes_[i - 1] * item) {
        return absl::DataLossError(absl::StrFormat(
            "%s: pointers[%d] = %d inconsistent with pointers[%d] + sizes[%d] * %d", idx_path, i,
            ds->pointers_[i], i == 0 ? 0 : i - 1, i == 0 ? 0 : i - 1, item));
      }
      tokens += ds->sizes_[i];
    }
    ds->total_tokens_ = tokens;
    return absl::OkStatus();
  }();
  unmap(idx);
  ANVIL_RETURN_IF_ERROR(parsed);

  ANVIL_ASSIGN_OR_RETURN(const Mapping bin, map_file(bin_path, /*keep_fd=*/true));
  ds->bin_path_ = bin_path;
  ds->bin_fd_ = bin.fd;
  ds->bin_ = bin.data;
  ds->bin_bytes_ = bin.bytes;
  register_mapping(bin.data, bin.bytes, bin_path);
  const int64_t n = ds->num_sequences();
  if (n > 0) {
    // Pointers are consistent (checked above), so the last sequence bounds them all.
    const int64_t item = static_cast<int64_t>(token_dtype_size(ds->dtype_));
    const int64_t end = ds->pointers_[n - 1] + int64_t{ds->sizes_[n - 1]} * item;
    if (end > static_cast<int64_t>(bin.bytes)) {
      return absl::DataLossError(absl::StrFormat(
          "%s: truncated: the index (%s) says %d sequences end at byte %d, file has %d bytes",
          bin_path, idx_path, n, end, bin.bytes));
    }
  }
  return ds;
}

IndexedDataset::~IndexedDataset() {
  unregister_mapping(bin_);
  unmap(Mapping{bin_, bin_bytes_});
  if (bin_fd_ >= 0) ::close(bin_fd_);
}

int64_t IndexedDataset::total_tokens() const { return total_tokens_; }

absl::Status IndexedDataset::read(int64_t seq, int64_t offset, int64_t count, int32_t* out) const {
  ANVIL_CHECK_MSG(seq >= 0 && seq < num_sequences(),
                  absl::StrFormat("sequence %d of %d", seq, num_sequences()));
  ANVIL_CHECK_MSG(offset >= 0 && count >= 0 && offset + count <= sizes_[seq],
                  absl::StrFormat("tokens [%d, %d) of a %d-token sequence", offset, offset + count,
                                  sizes_[seq]));
  if (count == 0) return absl::OkStatus();
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype_));
  // A .bin truncated since open() would fault (SIGBUS) on the pages past its new end.
  const int64_t end = pointers_[seq] + (offset + count) * item;
  struct stat st;
  const bool stat_ok = ::fstat(bin_fd_, &st) == 0;
  if (!stat_ok || st.st_size < end) {
    // The .bin changed under the running job: the samples planned from it are gone.
    return absl::DataLossError(
        stat_ok ? absl::StrFormat("%s: the file shrank to %d bytes after it was opened (truncated "
                                  "or rewritten while in use); sequence %d needs bytes up to %d",
                                  bin_path_, static_cast<int64_t>(st.st_size), seq, end)
                : absl::StrCat(bin_path_, ": cannot stat: ", errno_text(errno)));
  }
  const uint8_t* src = bin_ + pointers_[seq] + offset * item;
  switch (dtype_) {
    case TokenDType::kU8:
      widen<uint8_t>(src, count, out);
      break;
    case TokenDType::kI8:
      widen<int8_t>(src, count, out);
      break;
    case TokenDType::kI16:
      widen<int16_t>(src, count, out);
      break;
    case TokenDType::kU16:
      widen<uint16_t>(src, count, out);
      break;
    case TokenDType::kI32:
      std::memcpy(out, src, count * 4);
      break;
    case TokenDType::kI64:
      widen<int64_t>(src, count, out);
      break;
    case TokenDType::kF64:
    case TokenDType::kF32:
      ANVIL_CHECK_MSG(false, "IndexedDataset: float token dtype (refused by open)");
  }
  return absl::OkStatus();
}

namespace {

// Calls f(T{}) with the C++ type of the token dtype (an integer: open() refuses floats).
template <typename F>
void with_token_type(TokenDType t, F&& f) {
  switch (t) {
    case TokenDType::kU8:
      return f(uint8_t{});
    case TokenDType::kI8:
      return f(int8_t{});
    case TokenDType::kI16:
      return f(int16_t{});
    case TokenDType::kU16:
      return f(uint16_t{});
    case TokenDType::kI32:
      return f(int32_t{});
    case TokenDType::kI64:
      return f(int64_t{});
    case TokenDType::kF64:
    case TokenDType::kF32:
      ANVIL_CHECK_MSG(false, "IndexedDataset: float token dtype (refused by open)");
  }
}

// The token id cache file: "min max bin_bytes bin_mtime_ns idx_bytes idx_mtime_ns".
std::string file_key(const struct stat& bin, const struct stat& idx) {
  return absl::StrCat(bin.st_size, " ", bin.st_mtim.tv_sec * 1000000000LL + bin.st_mtim.tv_nsec,
                      " ", idx.st_size, " ",
                      idx.st_mtim.tv_sec * 1000000000LL + idx.st_mtim.tv_nsec);
}

}  // namespace

TokenIdRange IndexedDataset::token_id_range(const std::string& cache_path) const {
  // The cache is valid while the .bin and the .idx keep their sizes and modification times.
  std::string key;
  struct stat bin, idx;
  const std::string idx_path = bin_path_.substr(0, bin_path_.size() - 4) + ".idx";
  if (!cache_path.empty() && ::fstat(bin_fd_, &bin) == 0 && ::stat(idx_path.c_str(), &idx) == 0) {
    key = file_key(bin, idx);
    std::ifstream in(cache_path);
    TokenIdRange cached;
    std::string rest;
    if (in >> cached.min >> cached.max && std::getline(in, rest) && rest == " " + key) {
      return cached;
    }
  }
  TokenIdRange r{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  if (num_sequences() > 0) {
    // Sequences are contiguous (checked at open): one pass over their bytes.
    const uint8_t* begin = bin_ + pointers_[0];
    const int64_t count = total_tokens_;
    with_token_type(dtype_, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < count; ++i) {
        const int64_t id =
            static_cast<int64_t>(load<T>(begin + i * static_cast<int64_t>(sizeof(T))));
        r.min = std::min(r.min, id);
        r.max = std::max(r.max, id);
      }
    });
  }
  if (r.min > r.max) r = TokenIdRange{};
  if (!key.empty()) {
    // Best effort (the directory may be read-only): written whole, then renamed into place.
    const std::string tmp = temp_path(cache_path);
    std::ofstream out(tmp, std::ios::trunc);
    out << r.min << " " << r.max << " " << key << "\n";
    out.close();
    if (!out || std::rename(tmp.c_str(), cache_path.c_str()) != 0) std::remove(tmp.c_str());
  }
  return r;
}

absl::Status IndexedDataset::check_token_ids(int64_t vocab_size,
                                             const std::string& cache_path) const {
  if ((dtype_ == TokenDType::kU8 && vocab_size >= 256) ||
      (dtype_ == TokenDType::kU16 && vocab_size >= 65536)) {
    return absl::OkStatus();  // every id the dtype can hold is in the vocabulary
  }
  const TokenIdRange range = token_id_range(cache_path);
  if (range.min >= 0 && range.max < vocab_size) return absl::OkStatus();
  // Some id is outside: a second pass finds the first one, for the message.
  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype_));
  for (int64_t d = 0; d < num_documents(); ++d) {
    for (int64_t q = doc_idx_[d]; q < doc_idx_[d + 1]; ++q) {
      int64_t at = -1, value = 0;
      with_token_type(dtype_, [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < sizes_[q] && at < 0; ++i) {
          const int64_t id = static_cast<int64_t>(load<T>(bin_ + pointers_[q] + i * item));
          if (id < 0 || id >= vocab_size) {
            at = i;
            value = id;
          }
        }
      });
      if (at >= 0) {
        const bool wide = value < std::numeric_limits<int32_t>::min() ||
                          value > std::numeric_limits<int32_t>::max();
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: document %d (sequence %d, token %d, byte %d) holds token id %d, outside [0, "
            "%d) (the vocabulary size)%s",
            bin_path_, d, q, at, pointers_[q] + at * item, value, vocab_size,
            wide ? "; it does not even fit int32" : ""));
      }
    }
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------------------------------
// Writer
// ------------------------------------------------------------------------------------------

struct IndexedDatasetWriter::Impl {
  std::string bin_path, idx_path, bin_tmp, idx_tmp;
  TokenDType dtype = TokenDType::kU16;
  size_t item = 2;
  std::FILE* bin = nullptr;
  std::vector<int32_t> sizes;
  std::vector<int64_t> doc_idx{0};
  std::vector<uint8_t> buffer;  // one sequence converted to the file dtype
  bool finished = false;
  bool failed = false;

  absl::Status io_error(const std::string& path, const char* action, int err) {
    failed = true;
    return absl::InternalError(absl::StrCat(path, ": cannot ", action, ": ", errno_text(err)));
  }
};

namespace {

// Range of token values a dtype can store.
std::pair<int64_t, int64_t> token_range(TokenDType t) {
  switch (t) {
    case TokenDType::kU8:
      return {0, 255};
    case TokenDType::kI8:
      return {-128, 127};
    case TokenDType::kI16:
      return {-32768, 32767};
    case TokenDType::kU16:
      return {0, 65535};
    default:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
}

template <typename T>
void narrow(absl::Span<const int32_t> tokens, uint8_t* dst) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const T v = static_cast<T>(tokens[i]);
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
}

// fsync a file by path's directory so the renames survive a crash (best effort).
void sync_parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> IndexedDatasetWriter::create(
    const std::string& prefix, TokenDType dtype) {
  if (dtype == TokenDType::kF32 || dtype == TokenDType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": token dtype ", dtype_label(dtype),
                                                   " is not written (use uint16 or int32)"));
  }
  if (token_dtype_size(dtype) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ": unknown token dtype code ", static_cast<int>(dtype)));
  }
  std::unique_ptr<IndexedDatasetWriter> w(new IndexedDatasetWriter());
  w->impl_ = std::make_unique<Impl>();
  Impl& im = *w->impl_;
  im.dtype = dtype;
  im.item = token_dtype_size(dtype);
  im.bin_path = prefix + ".bin";
  im.idx_path = prefix + ".idx";
  // Host and pid keep two writers of the same prefix from clobbering each other's temporaries.
  im.bin_tmp = temp_path(im.bin_path);
  im.idx_tmp = temp_path(im.idx_path);
  im.bin = std::fopen(im.bin_tmp.c_str(), "wb");
  if (im.bin == nullptr) return file_error(im.bin_tmp, "create", errno);
  std::setvbuf(im.bin, nullptr, _IOFBF, 1 << 20);
  return w;
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (impl_ == nullptr || impl_->finished) return;
  // Abandoned or failed: leave no partial files behind.
  if (impl_->bin != nullptr) std::fclose(impl_->bin);
  std::remove(impl_->bin_tmp.c_str());
  std::remove(impl_->idx_tmp.c_str());
}

absl::Status IndexedDatasetWriter::add_sequence(absl::Span<const int32_t> tokens) {
  Impl& im = *impl_;
  if (im.finished || im.failed) {
    return absl::FailedPreconditionError(
        absl::StrCat(im.bin_path, ": add_sequence after finish() or a failed write"));
  }
  if (tokens.empty()) return absl::OkStatus();
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: sequence of %d tokens exceeds the int32 size field", im.bin_path, tokens.size()));
  }
  const auto [lo, hi] = token_range(im.dtype);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < lo || tokens[i] > hi) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: token %d (position %d of sequence %d) out of range [%d, %d] for dtype %s",
          im.bin_path, tokens[i], i, im.sizes.size(), lo, hi, dtype_label(im.dtype)));
    }
  }
  im.buffer.resize(tokens.size() * im.item);
  uint8_t* dst = im.buffer.data();
  switch (im.dtype) {
    case TokenDType::kU8:
      narrow<uint8_t>(tokens, dst);
      break;
    case TokenDType::kI8:
      narrow<int8_t>(tokens, dst);
      break;
    case TokenDType::kI16:
      narrow<int16_t>(tokens, dst);
      break;
    case TokenDType::kU16:
      narrow<uint16_t>(tokens, dst);
      break;
    case TokenDType::kI32:
      narrow<int32_t>(tokens, dst);
      break;
    case TokenDType::kI64:
      narrow<int64_t>(tokens, dst);
      break;
    case TokenDType::kF64:
    case TokenDType::kF32:
      return absl::InternalError("float dtype in writer");
  }
  if (std::fwrite(dst, 1, im.buffer.size(), im.bin) != im.buffer.size()) {
    return im.io_error(im.bin_tmp, "write", errno);
  }
  im.sizes.push_back(static_cast<int32_t>(tokens.size()));
  return absl::OkStatus();
}

absl::Status IndexedDatasetWriter::end_document() {
  Impl& im = *impl_;
  if (im.finished) {
    return absl::FailedPreconditionError(absl::StrCat(im.idx_path, ": end_document after finish"));
  }
  const int64_t n = static_cast<int64_t>(im.sizes.size());
  if (n > im.doc_idx.back()) im.doc_idx.push_back(n);
  return absl::OkStatus();
}

absl::Status IndexedDatasetWriter::finish() {
  Impl& im = *impl_;
  if (im.finished || im.failed) {
    return absl::FailedPreconditionError(
        absl::StrCat(im.idx_path, ": finish() called twice or after a failed write"));
  }
  // Sequences added after the last end_document() form a final document, so doc_idx[-1] == N.
  ANVIL_RETURN_IF_ERROR(end_document());

  if (std::fflush(im.bin) != 0) return im.io_error(im.bin_tmp, "write", errno);
  if (::fsync(::fileno(im.bin)) != 0) return im.io_error(im.bin_tmp, "fsync", errno);
  if (std::fclose(im.bin) != 0) {
    im.bin = nullptr;
    return im.io_error(im.bin_tmp, "close", errno);
  }
  im.bin = nullptr;

  // Index bytes, laid out exactly as Megatron's _Writer.write (see the header comment).
  const uint64_t n = im.sizes.size();
  const uint64_t d = im.doc_idx.size();
  std::vector<uint8_t> idx(kHeaderBytes + 12 * n + 8 * d);
  uint8_t* p = idx.data();
  std::memcpy(p, kMagic, 9);
  std::memcpy(p + 9, &kVersion, 8);
  p[17] = static_cast<uint8_t>(im.dtype);
  std::memcpy(p + 18, &n, 8);
  std::memcpy(p + 26, &d, 8);
  p += kHeaderBytes;
  if (n > 0) std::memcpy(p, im.sizes.data(), 4 * n);
  p += 4 * n;
  int64_t pointer = 0;  // exclusive prefix sum of sizes * itemsize, in int64
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(p + 8 * i, &pointer, 8);
    pointer += int64_t{im.sizes[i]} * static_cast<int64_t>(im.item);
  }
  p += 8 * n;
  std::memcpy(p, im.doc_idx.data(), 8 * d);

  std::FILE* f = std::fopen(im.idx_tmp.c_str(), "wb");
  if (f == nullptr) return im.io_error(im.idx_tmp, "create", errno);
  const bool wrote = std::fwrite(idx.data(), 1, idx.size(), f) == idx.size() &&
                     std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !wrote) return im.io_error(im.idx_tmp, "write", wrote ? errno : err);

  // .bin first: a reader that sees the new .idx also sees the .bin it describes.
  if (std::rename(im.bin_tmp.c_str(), im.bin_path.c_str()) != 0) {
    return im.io_error(im.bin_path, "rename into place", errno);
  }
  if (std::rename(im.idx_tmp.c_str(), im.idx_path.c_str()) != 0) {
    return im.io_error(im.idx_path, "rename into place", errno);
  }
  sync_parent_dir(im.idx_path);
  im.finished = true;
  return absl::OkStatus();
}

}  // namespace anvil::io
