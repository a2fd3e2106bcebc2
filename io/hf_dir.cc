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
    files.insert(hf_dir + "/" + file.get<std::string>());
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
