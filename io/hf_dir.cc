// Reading a Hugging Face model directory's safetensors (see hf_dir.h).
#include "io/hf_dir.h"

#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/durable_file.h"
#include "io/json_fields.h"
#include "io/safetensors.h"
#include "nlohmann/json.hpp"

namespace anvil::io {
namespace {

namespace fs = std::filesystem;

// hf_dir/shard for a shard the index names for tensor `name`. InvalidArgument naming both when
// the shard is not a plain file name inside the directory: an absolute path, a ".." component
// or a symbolic link that leads out of it (an index must not make anvil read other files).
absl::StatusOr<std::string> shard_path(const std::string& hf_dir, const std::string& shard,
                                       const std::string& index, const std::string& name) {
  const fs::path rel(shard);
  bool escapes = shard.empty() || rel.is_absolute();
  for (const fs::path& part : rel) escapes = escapes || part == "..";
  const std::string path = hf_dir + "/" + shard;
  std::error_code ec1, ec2;
  const fs::path root = fs::weakly_canonical(hf_dir, ec1);
  const fs::path real = fs::weakly_canonical(path, ec2);
  if (!escapes && !ec1 && !ec2) {  // symbolic links resolved
    const fs::path inside = real.lexically_relative(root);
    escapes = inside.empty() || inside == "." || *inside.begin() == "..";
  }
  if (escapes) {
    return absl::InvalidArgumentError(
        absl::StrCat(index, ": the shard \"", shard, "\" of tensor ", name, " is outside ", hf_dir,
                     " (shards must be files in the model directory)"));
  }
  return path;
}

// The safetensors files of an HF directory: the index's shards, or model.safetensors.
absl::StatusOr<std::vector<std::string>> hf_files(const std::string& hf_dir) {
  const std::string index = hf_dir + "/model.safetensors.index.json";
  if (!std::filesystem::exists(index)) {
    return std::vector<std::string>{hf_dir + "/model.safetensors"};
  }
  ANVIL_ASSIGN_OR_RETURN(std::string text, read_file(index));
  ANVIL_ASSIGN_OR_RETURN(nlohmann::json j, parse_json_text(text, index));
  ANVIL_ASSIGN_OR_RETURN(const nlohmann::json* map, json_field(j, "weight_map", index));
  if (!map->is_object()) return absl::DataLossError(index + ": weight_map is not an object");
  std::set<std::string> files;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) return absl::DataLossError(index + ": bad file of " + name);
    ANVIL_ASSIGN_OR_RETURN(std::string path,
                           shard_path(hf_dir, file.get<std::string>(), index, name));
    files.insert(std::move(path));
  }
  return std::vector<std::string>(files.begin(), files.end());
}

}  // namespace

absl::StatusOr<std::vector<engine::HostSlice>> read_hf_tensors(const std::string& hf_dir) {
  std::vector<engine::HostSlice> hf;
  std::set<std::string> seen;
  ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> files, hf_files(hf_dir));
  for (const std::string& path : files) {
    ANVIL_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::open(path));
    for (const auto& [hf_name, info] : st.tensors()) {
      if (!seen.insert(hf_name).second) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", hf_name, " appears twice"));
      }
      ANVIL_ASSIGN_OR_RETURN(std::vector<float> data, st.read_f32(hf_name));
      hf.push_back({hf_name, info.shape, std::vector<int64_t>(info.shape.size(), 0), info.shape,
                    std::move(data)});
    }
  }
  return hf;
}

}  // namespace anvil::io
