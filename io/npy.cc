// .npy read (mmap + validation) and atomic write (see npy.h).
#include "io/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/status.h"
#include "io/temp_files.h"

namespace anvil::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;             // numpy's ARRAY_ALIGN
constexpr size_t kGrowthAxisDigits = 21;  // numpy's GROWTH_AXIS_MAX_DIGITS (spare header room)

absl::Status data_loss(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": not a valid .npy index file: ", what));
}

std::string errno_text(int err) { return std::strerror(err); }

// Python's repr of a shape tuple: "()", "(7,)", "(11, 2)".
std::string shape_repr(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

// The value text after 'key': in a header dict, up to the next top-level ',' (or the closing
// parenthesis of a tuple). Returns false when the key is missing.
bool header_value(const std::string& header, const std::string& key, std::string* value) {
  const std::string quoted[2] = {"'" + key + "'", "\"" + key + "\""};
  size_t pos = std::string::npos;
  for (const std::string& q : quoted) {
    pos = header.find(q);
    if (pos != std::string::npos) {
      pos += q.size();
      break;
    }
  }
  if (pos == std::string::npos) return false;
  while (pos < header.size() && (header[pos] == ' ')) ++pos;
  if (pos >= header.size() || header[pos] != ':') return false;
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end = pos;
  if (pos < header.size() && header[pos] == '(') {
    end = header.find(')', pos);
    if (end == std::string::npos) return false;
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  *value = std::string(absl::StripAsciiWhitespace(header.substr(pos, end - pos)));
  return true;
}

struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, bytes);
  }
};

}  // namespace

const char* npy_descr(NpyDType t) {
  switch (t) {
    case NpyDType::kI32:
      return "<i4";
    case NpyDType::kU32:
      return "<u4";
    case NpyDType::kI64:
      return "<i8";
    case NpyDType::kU64:
      return "<u8";
    case NpyDType::kU8:
      return "|u1";
  }
  return "?";
}

size_t npy_itemsize(NpyDType t) {
  switch (t) {
    case NpyDType::kI32:
    case NpyDType::kU32:
      return 4;
    case NpyDType::kI64:
    case NpyDType::kU64:
      return 8;
    case NpyDType::kU8:
      return 1;
  }
  return 0;
}

absl::Status write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape,
                       const void* data) {
  int64_t count = 1;
  for (int64_t d : shape) {
    ANVIL_CHECK_MSG(d >= 0, absl::StrCat("write_npy: negative dimension in ", shape_repr(shape)));
    count *= d;
  }
  // numpy 1.24 _write_array_header: keys sorted, spare room for the first axis to grow, then
  // spaces and '\n' up to a multiple of 64 bytes including the 10-byte preamble.
  std::string header = absl::StrFormat("{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                                       npy_descr(dtype), shape_repr(shape));
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisDigits) header.append(kGrowthAxisDigits - digits, ' ');
  }
  const size_t preamble = kMagicLen + 2 + 2;
  const size_t hlen = header.size() + 1;
  header.append(kAlign - (preamble + hlen) % kAlign, ' ');
  header.push_back('\n');
  ANVIL_CHECK_MSG(header.size() <= 65535, "write_npy: header too long for format 1.0");
  std::string pre(kMagic, kMagicLen);
  pre.push_back('\x01');
  pre.push_back('\x00');
  pre.push_back(static_cast<char>(header.size() & 0xff));
  pre.push_back(static_cast<char>(header.size() >> 8));

  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(temp_path(path), ".", counter++);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", tmp, ": ", errno_text(errno)));
  }
  const size_t bytes = static_cast<size_t>(count) * npy_itemsize(dtype);
  bool ok = std::fwrite(pre.data(), 1, pre.size(), f) == pre.size() &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            (bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes) && std::fflush(f) == 0 &&
            ::fsync(::fileno(f)) == 0;
  const int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", errno_text(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rerr = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", errno_text(rerr)));
  }
  return absl::OkStatus();
}

NpyArray NpyArray::wrap(NpyDType dtype, std::vector<int64_t> shape, int64_t count, size_t itemsize,
                        const void* data, std::shared_ptr<const void> owner) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  ANVIL_CHECK_MSG(n == count, absl::StrCat("NpyArray: shape ", shape_repr(shape), " holds ", n,
                                           " elements, the buffer ", count));
  ANVIL_CHECK_MSG(itemsize == npy_itemsize(dtype), absl::StrCat("NpyArray: element size ", itemsize,
                                                                " for dtype ", npy_descr(dtype)));
  NpyArray a;
  a.storage_ = std::move(owner);
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.size_ = n;
  a.data_ = data;
  return a;
}

absl::StatusOr<NpyArray> NpyArray::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": not found"));
    return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, ": ", errno_text(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", errno_text(err)));
  }
  auto map = std::make_shared<Mapping>();
  map->bytes = static_cast<size_t>(st.st_size);
  if (map->bytes > 0) {
    void* p = ::mmap(nullptr, map->bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot mmap ", path, ": ", errno_text(err)));
    }
    map->addr = p;
  }
  ::close(fd);
  const auto* bytes = static_cast<const uint8_t*>(map->addr);
  const size_t size = map->bytes;

  if (size < kMagicLen + 4 || std::memcmp(bytes, kMagic, kMagicLen) != 0) {
    return data_loss(path, "bad magic (expected \"\\x93NUMPY\")");
  }
  const int major = bytes[6];
  size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return data_loss(path, "truncated header");
    hlen = 0;
    for (int k = 0; k < 4; ++k) hlen |= static_cast<size_t>(bytes[8 + k]) << (8 * k);
    hstart = 12;
  } else {
    return data_loss(path, absl::StrCat("unsupported format version ", major));
  }
  if (hstart + hlen > size) return data_loss(path, "truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes + hstart), hlen);

  std::string descr, fortran, shape_text;
  if (!header_value(header, "descr", &descr) || !header_value(header, "fortran_order", &fortran) ||
      !header_value(header, "shape", &shape_text)) {
    return data_loss(path, absl::StrCat("header lacks descr/fortran_order/shape: ", header));
  }
  descr = std::string(absl::StripSuffix(absl::StripPrefix(descr, "'"), "'"));
  NpyDType dtype;
  if (descr == "<i4") {
    dtype = NpyDType::kI32;
  } else if (descr == "<u4") {
    dtype = NpyDType::kU32;
  } else if (descr == "<i8") {
    dtype = NpyDType::kI64;
  } else if (descr == "<u8") {
    dtype = NpyDType::kU64;
  } else if (descr == "|u1" || descr == "<u1") {
    dtype = NpyDType::kU8;
  } else {
    return data_loss(path, absl::StrCat("unsupported dtype '", descr,
                                        "' (expected little-endian int32/uint32/int64/uint64/"
                                        "uint8)"));
  }
  std::vector<int64_t> shape;
  const std::string inner(absl::StripSuffix(absl::StripPrefix(shape_text, "("), ")"));
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return data_loss(path, absl::StrCat("bad shape ", shape_text));
    }
    shape.push_back(d);
  }
  if (fortran != "False" && shape.size() > 1) {
    return data_loss(path, "fortran_order arrays are not supported");
  }
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d > 0 && count > (int64_t{1} << 62) / d) return data_loss(path, "shape too large");
    count *= d;
  }
  const size_t data_start = hstart + hlen;
  const size_t want = static_cast<size_t>(count) * npy_itemsize(dtype);
  if (size - data_start != want) {
    return data_loss(path, absl::StrFormat("shape %s of %s needs %d data bytes, the file holds %d",
                                           shape_text, descr, want, size - data_start));
  }
  if (data_start % npy_itemsize(dtype) != 0) {
    // A writer that did not align the data (numpy always does): copy rather than read unaligned.
    auto copy = std::make_shared<std::vector<uint64_t>>((want + 7) / 8);
    if (want > 0) std::memcpy(copy->data(), bytes + data_start, want);
    const void* data = copy->data();
    return wrap(dtype, std::move(shape), count, npy_itemsize(dtype), data, std::move(copy));
  }
  return wrap(dtype, std::move(shape), count, npy_itemsize(dtype), bytes + data_start,
              std::shared_ptr<const void>(map, map.get()));
}

absl::Status NpyArray::save(const std::string& path) const {
  return write_npy(path, dtype_, shape_, data_);
}

}  // namespace anvil::io
