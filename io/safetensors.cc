// safetensors reader and writer (see safetensors.h).
#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "io/durable_file.h"
#include "io/json_fields.h"

namespace anvil::io {
namespace {

using json = nlohmann::json;

constexpr StDType kAllDTypes[] = {StDType::kF64, StDType::kF32, StDType::kF16, StDType::kBF16,
                                  StDType::kI64, StDType::kI32, StDType::kI16, StDType::kI8,
                                  StDType::kU8,  StDType::kBool};
// A header larger than this is not a safetensors file (the Python library's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

bool parse_dtype(const std::string& name, StDType* out) {
  for (StDType t : kAllDTypes) {
    if (name == st_dtype_name(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

// Reads exactly n bytes at `offset`; DataLoss naming the file on a short read.
absl::Status pread_all(int fd, const std::string& path, void* dst, size_t n, int64_t offset) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return absl::DataLossError(absl::StrCat(
          path, ": short read at byte ", offset,
          r < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (file truncated)")));
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return absl::OkStatus();
}

// The bytes of a tensor of `info`'s shape and dtype; DataLoss naming `where` for a negative
// dimension or a size past engine::kMaxElements elements (a corrupt or hostile header whose
// product would wrap around int64 and match a small data range).
absl::StatusOr<int64_t> checked_bytes(const StTensorInfo& info, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : info.shape) {
    if (d < 0) return absl::DataLossError(absl::StrCat(where, ": negative dimension ", d));
    const std::optional<int64_t> p = engine::checked_mul(n, d);
    if (!p || *p > engine::kMaxElements) {
      return absl::DataLossError(absl::StrCat(where, ": shape ", json(info.shape).dump(),
                                              " has more than ", engine::kMaxElements,
                                              " elements (corrupt header?)"));
    }
    n = *p;
  }
  return n * static_cast<int64_t>(st_dtype_size(info.dtype));  // <= 2^47: no overflow
}

}  // namespace

const char* st_dtype_name(StDType t) {
  switch (t) {
    case StDType::kF64:
      return "F64";
    case StDType::kF32:
      return "F32";
    case StDType::kF16:
      return "F16";
    case StDType::kBF16:
      return "BF16";
    case StDType::kI64:
      return "I64";
    case StDType::kI32:
      return "I32";
    case StDType::kI16:
      return "I16";
    case StDType::kI8:
      return "I8";
    case StDType::kU8:
      return "U8";
    case StDType::kBool:
      return "BOOL";
  }
  return "?";
}

size_t st_dtype_size(StDType t) {
  switch (t) {
    case StDType::kF64:
    case StDType::kI64:
      return 8;
    case StDType::kF32:
    case StDType::kI32:
      return 4;
    case StDType::kF16:
    case StDType::kBF16:
    case StDType::kI16:
      return 2;
    case StDType::kI8:
    case StDType::kU8:
    case StDType::kBool:
      return 1;
  }
  return 0;
}

int64_t StTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

absl::StatusOr<StWriteResult> write_safetensors(
    const std::string& path, const std::vector<StTensorRef>& tensors,
    const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t at = 0;
  for (const StTensorRef& t : tensors) {
    if (t.name == "__metadata__" || header.contains(t.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name \"", t.name, "\" is reserved or used twice"));
    }
    ANVIL_ASSIGN_OR_RETURN(const int64_t bytes,
                           checked_bytes(StTensorInfo{t.dtype, t.shape, 0, 0},
                                         absl::StrCat(path, ": tensor \"", t.name, "\"")));
    header[t.name] = {
        {"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<unsigned char>(len >> (8 * i));
  ANVIL_ASSIGN_OR_RETURN(DurableWriter w, DurableWriter::create(path));
  ANVIL_RETURN_IF_ERROR(w.append(len_le, 8));
  ANVIL_RETURN_IF_ERROR(w.append(text.data(), text.size()));
  // Data in header order: nlohmann's object keys are sorted, the offsets follow `tensors`.
  for (const StTensorRef& t : tensors) {
    const json& e = header[t.name];
    const int64_t bytes = e["data_offsets"][1].get<int64_t>() - e["data_offsets"][0].get<int64_t>();
    ANVIL_RETURN_IF_ERROR(w.append(t.data, static_cast<size_t>(bytes)));
  }
  ANVIL_RETURN_IF_ERROR(w.finish());
  return StWriteResult{w.bytes(), w.crc32c()};
}

absl::StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) return absl::DataLossError(absl::StrCat(path, ": cannot stat: ", ec.message()));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat(path, ": cannot open"));
  std::string text;
  unsigned char len_le[8];
  absl::Status st = size < 8 ? absl::DataLossError(absl::StrCat(
                                   path, ": ", size, " bytes, too short for a safetensors header"))
                             : pread_all(fd, path, len_le, 8, 0);
  uint64_t len = 0;
  if (st.ok()) {
    for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(len_le[i]) << (8 * i);
    if (len > kMaxHeaderBytes || static_cast<int64_t>(len) > size - 8) {
      st = absl::DataLossError(absl::StrCat(path, ": header length ", len,
                                            " does not fit the file of ", size, " bytes"));
    }
  }
  if (st.ok()) {
    text.resize(len);
    st = pread_all(fd, path, text.data(), len, 8);
  }
  ::close(fd);
  ANVIL_RETURN_IF_ERROR(st);
  ANVIL_ASSIGN_OR_RETURN(json header, parse_json_text(text, path + " (safetensors header)"));
  if (!header.is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": the header is not a JSON object"));
  }
  SafetensorsFile f;
  f.path_ = path;
  f.data_start_ = 8 + static_cast<int64_t>(len);
  const int64_t data_bytes = size - f.data_start_;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) return absl::DataLossError(absl::StrCat(path, ": bad __metadata__"));
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string()) {
          return absl::DataLossError(
              absl::StrCat(path, ": __metadata__ value of \"", k, "\" is not a string"));
        }
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = absl::StrCat(path, ": tensor \"", name, "\"");
    StTensorInfo info;
    ANVIL_ASSIGN_OR_RETURN(std::string dtype, json_string(e, "dtype", where));
    if (!parse_dtype(dtype, &info.dtype)) {
      return absl::DataLossError(absl::StrCat(where, ": unsupported dtype ", dtype));
    }
    ANVIL_ASSIGN_OR_RETURN(info.shape, json_int_list(e, "shape", where));
    ANVIL_ASSIGN_OR_RETURN(std::vector<int64_t> off, json_int_list(e, "data_offsets", where));
    ANVIL_ASSIGN_OR_RETURN(const int64_t want, checked_bytes(info, where));
    if (off.size() != 2) {
      return absl::DataLossError(absl::StrCat(where, ": data_offsets needs 2 values"));
    }
    info.begin = off[0];
    info.end = off[1];
    if (info.begin < 0 || info.end < info.begin || info.end - info.begin != want) {
      return absl::DataLossError(absl::StrCat(where, ": data_offsets [", info.begin, ", ", info.end,
                                              ") do not hold ", want, " bytes"));
    }
    if (info.end > data_bytes) {
      return absl::DataLossError(absl::StrCat(where, ": data ends at byte ", info.end,
                                              " of the data section but the file holds only ",
                                              data_bytes, " (truncated?)"));
    }
    f.tensors_[name] = std::move(info);
  }
  return f;
}

absl::StatusOr<StTensorInfo> SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor \"", name, "\""));
  }
  return it->second;
}

absl::StatusOr<std::vector<char>> SafetensorsFile::read_bytes(const std::string& name) const {
  ANVIL_ASSIGN_OR_RETURN(StTensorInfo info, this->info(name));
  std::vector<char> out(static_cast<size_t>(info.end - info.begin));
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat(path_, ": cannot open"));
  const absl::Status st = pread_all(fd, path_, out.data(), out.size(), data_start_ + info.begin);
  ::close(fd);
  ANVIL_RETURN_IF_ERROR(st);
  return out;
}

absl::StatusOr<std::vector<float>> SafetensorsFile::read_f32(const std::string& name) const {
  ANVIL_ASSIGN_OR_RETURN(StTensorInfo info, this->info(name));
  ANVIL_ASSIGN_OR_RETURN(std::vector<char> raw, read_bytes(name));
  const size_t n = static_cast<size_t>(info.numel());
  std::vector<float> out(n);
  switch (info.dtype) {
    case StDType::kF32:
      std::memcpy(out.data(), raw.data(), n * 4);
      break;
    case StDType::kF64:
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, raw.data() + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      break;
    case StDType::kF16:
    case StDType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, raw.data() + 2 * i, 2);
        out[i] = info.dtype == StDType::kBF16 ? engine::bf16_to_f32(h) : engine::f16_to_f32(h);
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor \"", name, "\" is ",
                                                     st_dtype_name(info.dtype),
                                                     ", expected a floating-point dtype"));
  }
  return out;
}

}  // namespace anvil::io
