// The model-family registry (see family.h).
#include "model/train/family.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"

namespace anvil::model {

absl::Status FamilyRegistry::add(Family f) {
  if (f.type.empty()) return absl::InvalidArgumentError("a model family needs a [model] type");
  if (!f.record_width || !f.parse || !f.summary || !f.activation_slots || !f.plan ||
      !f.offload_bytes || !f.create || !f.model_record || !f.tensor_shapes || !f.layers ||
      !f.layout_record) {
    return absl::InvalidArgumentError(
        absl::StrCat("model family '", f.type, "': every hook of model::Family must be set"));
  }
  if (find(f.type).ok()) {
    return absl::AlreadyExistsError(
        absl::StrCat("model family '", f.type, "' is registered already"));
  }
  families_.push_back(std::make_unique<const Family>(std::move(f)));
  return absl::OkStatus();
}

absl::StatusOr<const Family*> FamilyRegistry::find(const std::string& type) const {
  for (const std::unique_ptr<const Family>& f : families_) {
    if (f->type == type) return f.get();
  }
  return absl::NotFoundError(
      absl::StrCat("[model] type '", type,
                   "' is not a model family; known types: ", absl::StrJoin(types(), ", ")));
}

std::vector<std::string> FamilyRegistry::types() const {
  std::vector<std::string> out;
  for (const std::unique_ptr<const Family>& f : families_) out.push_back(f->type);
  std::sort(out.begin(), out.end());
  return out;
}

FamilyRegistry& family_registry() {
  // Built on first use, thread-safe (a function-local static), with the built-in families.
  static FamilyRegistry* registry = [] {
    auto* r = new FamilyRegistry;
    ANVIL_CHECK_OK(register_builtin_families(*r));
    return r;
  }();
  return *registry;
}

absl::StatusOr<const Family*> find_family(const std::string& type) {
  return family_registry().find(type);
}

absl::Status check_causal_lm(const Family& family) {
  if (family.causal_lm) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("inference (generation, serving, evaluation) needs a causal LM; this model is "
                   "type ",
                   family.type));
}

const Family& family_of(const TrainConfig& cfg) {
  absl::StatusOr<const Family*> f = find_family(cfg.family);
  ANVIL_CHECK_MSG(f.ok(), std::string(f.status().message()));
  return **f;
}

}  // namespace anvil::model
