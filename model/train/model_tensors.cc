// The logical tensors of a model and the check of an imported set (see model_tensors.h).
#include "model/train/model_tensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/train/family.h"

namespace anvil::model {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

}  // namespace

std::map<std::string, std::vector<int64_t>> model_tensor_shapes(const TrainConfig& cfg) {
  return family_of(cfg).tensor_shapes(cfg);
}

absl::Status check_model_tensors(const TrainConfig& cfg,
                                 const std::vector<engine::HostSlice>& tensors,
                                 const std::string& where) {
  const std::map<std::string, std::vector<int64_t>> want = model_tensor_shapes(cfg);
  std::map<std::string, const engine::HostSlice*> have;
  for (const engine::HostSlice& t : tensors) have[t.tensor] = &t;
  const std::string model =
      absl::StrCat("the model of ", family_of(cfg).layers(cfg), " that ", where, " describes");
  for (const auto& [name, shape] : want) {
    if (have.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing tensor ", name, " ", shape_str(shape), ": ", model, " has it"));
    }
  }
  for (const auto& [name, t] : have) {
    if (want.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " ", shape_str(t->shape), " is not part of ", model));
    }
  }
  for (const auto& [name, t] : have) {
    if (t->shape != want.at(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " has shape ", shape_str(t->shape), ", ", model, " needs ",
                       shape_str(want.at(name)), " (transposed or another size?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace anvil::model
