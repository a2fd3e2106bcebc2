// Carver and the arenas it carves from (see carver.h).
#include "model/carver.h"

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::model {

absl::StatusOr<std::vector<std::pair<std::string, engine::Arena>>> allocate_arenas(
    const engine::MemoryPlan& plan, engine::Device device, const std::string& what) {
  std::vector<std::pair<std::string, engine::Arena>> arenas;
  for (const std::string& cat : plan.categories()) {
    const size_t bytes = plan.category_bytes(cat);
    if (bytes == 0) continue;
    ANVIL_ASSIGN_OR_RETURN(engine::Arena a, engine::Arena::create(device, bytes, what + " " + cat));
    arenas.emplace_back(cat, std::move(a));
  }
  return arenas;
}

engine::Arena* Carver::arena(const std::string& category) {
  for (auto& [name, a] : *arenas_) {
    if (name == category) return &a;
  }
  return nullptr;
}

engine::TensorView Carver::take(const std::string& category, const std::string& name,
                                engine::DType dtype, const std::vector<int64_t>& shape) {
  if (planning()) {
    plan_->add(category, name, engine::arena_bytes(dtype, shape));
    engine::TensorView v;
    v.dtype = dtype;
    v.ndim = static_cast<int>(shape.size());
    for (int d = 0; d < v.ndim; ++d) v.shape[d] = shape[d];
    return v;
  }
  engine::Arena* a = arena(category);
  if (a == nullptr) {
    if (status_.ok()) status_ = absl::InternalError(absl::StrCat("no arena for ", category));
    return {};
  }
  absl::StatusOr<engine::TensorView> v = a->allocate(dtype, shape, name);
  if (!v.ok()) {
    if (status_.ok()) status_ = v.status();
    return {};
  }
  return *v;
}

engine::Workspace Carver::take_workspace(const std::string& category, const std::string& name,
                                         size_t bytes) {
  if (bytes == 0) return {};
  if (planning()) {
    plan_->add(category, name, engine::align_up(bytes));
    return {};
  }
  engine::Arena* a = arena(category);
  if (a == nullptr) {
    if (status_.ok()) status_ = absl::InternalError(absl::StrCat("no arena for ", category));
    return {};
  }
  absl::StatusOr<engine::Workspace> ws = a->allocate_workspace(bytes, name);
  if (!ws.ok()) {
    if (status_.ok()) status_ = ws.status();
    return {};
  }
  return *ws;
}

}  // namespace anvil::model
