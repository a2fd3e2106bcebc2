// .pt zip archives through libzip (io/torch_pt/pt_file.h).
#include "io/torch_pt/pt_file.h"

#include <zip.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/dtype.h"
#include "engine/status.h"
#include "io/torch_pt/pickle.h"

namespace anvil::io::torch_pt {

struct PtFile::Zip {
  zip_t* z = nullptr;
  ~Zip() {
    if (z) zip_discard(z);
  }
};

namespace {

absl::StatusOr<std::string> read_entry(zip_t* z, zip_int64_t idx, const std::string& path,
                                       const std::string& name) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(z, idx, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    return absl::DataLossError(absl::StrCat(path, ": cannot stat zip entry ", name));
  }
  if (st.size > (uint64_t{1} << 40)) {
    return absl::DataLossError(
        absl::StrCat(path, ": zip entry ", name, " claims ", st.size, " bytes"));
  }
  zip_file_t* f = zip_fopen_index(z, idx, 0);
  if (!f) {
    return absl::DataLossError(
        absl::StrCat(path, ": cannot open zip entry ", name, ": ", zip_strerror(z)));
  }
  std::string out(st.size, '\0');
  const zip_int64_t n = zip_fread(f, out.data(), st.size);
  const std::string ferr = zip_file_strerror(f);
  zip_fclose(f);
  if (n < 0 || static_cast<uint64_t>(n) != st.size) {
    return absl::DataLossError(absl::StrCat(path, ": zip entry ", name, ": read ", n, " of ",
                                            st.size, " bytes (", ferr, ")"));
  }
  return out;
}

}  // namespace

absl::StatusOr<PtFile> PtFile::open(const std::string& path) {
  int zerr = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    std::string msg = zip_error_strerror(&e);
    zip_error_fini(&e);
    if (zerr == ZIP_ER_NOENT || zerr == ZIP_ER_OPEN) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", msg));
    }
    return absl::DataLossError(absl::StrCat(
        path, ": not a readable zip archive (", msg,
        "): a torch.save .pt file is a zip; a truncated one lacks its central directory"));
  }
  PtFile p;
  p.path_ = path;
  p.zip_ = std::make_shared<Zip>();
  p.zip_->z = z;
  // The one "<prefix>/data.pkl" entry names the prefix of every record.
  const zip_int64_t n = zip_get_num_entries(z, 0);
  zip_int64_t pkl = -1;
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(z, i, 0);
    if (!name) continue;
    const std::string s = name;
    if (absl::EndsWith(s, "/data.pkl") && s.find('/') == s.size() - 9) {
      if (pkl >= 0) return absl::DataLossError(absl::StrCat(path, ": two data.pkl records"));
      pkl = i;
      p.prefix_ = s.substr(0, s.size() - 8);
    }
  }
  if (pkl < 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": a zip without <prefix>/data.pkl: not a torch.save file"));
  }
  ANVIL_ASSIGN_OR_RETURN(std::string bytes, read_entry(z, pkl, path, p.prefix_ + "data.pkl"));
  ANVIL_ASSIGN_OR_RETURN(p.root_, read_pickle(bytes, path + " (data.pkl)"));
  return p;
}

absl::StatusOr<std::string> PtFile::storage_bytes(const TensorRef& t) const {
  auto it = cache_.find(t.key);
  if (it == cache_.end()) {
    const std::string name = prefix_ + "data/" + t.key;
    const zip_int64_t idx = zip_name_locate(zip_->z, name.c_str(), 0);
    if (idx < 0) {
      return absl::DataLossError(
          absl::StrCat(path_, ": the pickle references storage ", name, ", which is missing"));
    }
    ANVIL_ASSIGN_OR_RETURN(std::string bytes, read_entry(zip_->z, idx, path_, name));
    it = cache_.emplace(t.key, std::move(bytes)).first;
  }
  const uint64_t want = static_cast<uint64_t>(t.storage_numel) * dtype_size(t.dtype);
  if (it->second.size() != want) {
    return absl::DataLossError(absl::StrCat(path_, ": storage ", prefix_, "data/", t.key, " holds ",
                                            it->second.size(), " bytes; the pickle says ",
                                            t.storage_numel, " ", dtype_name(t.dtype),
                                            " elements (", want, " bytes)"));
  }
  return it->second;
}

absl::StatusOr<std::vector<float>> PtFile::read_f32(const TensorRef& t,
                                                    const std::string& what) const {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16 &&
      t.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", what, " is a ", dtype_name(t.dtype),
                     " tensor; expected float32, float16, bfloat16 or float64"));
  }
  ANVIL_ASSIGN_OR_RETURN(std::string bytes, storage_bytes(t));
  const int64_t n = t.numel();
  std::vector<float> out(n);
  const size_t es = dtype_size(t.dtype);
  std::vector<int64_t> idx(t.shape.size(), 0);
  int64_t src = t.offset;
  for (int64_t k = 0; k < n; ++k) {
    const char* p = bytes.data() + src * es;
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(&out[k], p, 4);
        break;
      case DType::kF64: {
        double d;
        std::memcpy(&d, p, 8);
        out[k] = static_cast<float>(d);
        break;
      }
      default: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[k] = t.dtype == DType::kBF16 ? engine::bf16_to_f32(h) : engine::f16_to_f32(h);
      }
    }
    // Next C-order index, moving `src` by the strides.
    for (size_t d = t.shape.size(); d-- > 0;) {
      src += t.stride[d];
      if (++idx[d] < t.shape[d]) break;
      src -= t.stride[d] * t.shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

ValuePtr PtWriter::add_tensor(DType dtype, const std::vector<int64_t>& shape, std::string bytes) {
  TensorRef t;
  t.dtype = dtype;
  t.key = std::to_string(storages_.size());
  t.shape = shape;
  t.stride.assign(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) t.stride[d - 1] = t.stride[d] * shape[d];
  t.storage_numel = static_cast<int64_t>(bytes.size() / dtype_size(dtype));
  storages_.push_back(std::move(bytes));
  return Value::tensor_ref(std::move(t));
}

ValuePtr PtWriter::add_f32(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return add_tensor(DType::kF32, shape, std::move(bytes));
}

absl::Status PtWriter::write(const std::string& path, const Value& root) const {
  ANVIL_ASSIGN_OR_RETURN(std::string pkl, write_pickle(root));
  // torch 1.13 names the records' folder after the file's stem.
  const std::string prefix = std::filesystem::path(path).stem().string() + "/";
  int zerr = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &zerr);
  if (!z)
    return absl::DataLossError(absl::StrCat(path, ": cannot create (libzip error ", zerr, ")"));
  std::vector<std::pair<std::string, const std::string*>> records;
  records.emplace_back(prefix + "data.pkl", &pkl);
  std::vector<std::string> names;
  for (size_t k = 0; k < storages_.size(); ++k) {
    records.emplace_back(prefix + "data/" + std::to_string(k), &storages_[k]);
  }
  static const std::string kVersion = "3\n";
  records.emplace_back(prefix + "version", &kVersion);
  for (const auto& [name, bytes] : records) {
    zip_source_t* src = zip_source_buffer(z, bytes->data(), bytes->size(), 0);
    const zip_int64_t idx = src ? zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      const std::string msg = zip_strerror(z);
      zip_discard(z);
      return absl::DataLossError(absl::StrCat(path, ": cannot add ", name, ": ", msg));
    }
    zip_set_file_compression(z, idx, ZIP_CM_STORE, 0);
    zip_file_set_mtime(z, idx, 315532800, 0);  // 1980-01-01: the same bytes on every write
  }
  if (zip_close(z) != 0) {
    const std::string msg = zip_strerror(z);
    zip_discard(z);
    return absl::DataLossError(absl::StrCat(path, ": cannot write: ", msg));
  }
  return absl::OkStatus();
}

}  // namespace anvil::io::torch_pt
