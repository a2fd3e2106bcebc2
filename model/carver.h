// Carver: hands a model's layout walk its views from the model's arenas (creation) or records
// their sizes in a MemoryPlan (planning), so that one walk gives both and the plan equals what
// creation allocates. Shared by every family's layout (model/stack/gpt_layout.h, model/t5/t5.h)
// and the inference arenas (model/infer/gpt_inference.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace anvil::model {

// Hands out views (creation) or records sizes (planning). In planning mode views have the right
// shape and dtype but no data.
class Carver {
 public:
  explicit Carver(engine::MemoryPlan* plan) : plan_(plan) {}
  explicit Carver(std::vector<std::pair<std::string, engine::Arena>>* arenas) : arenas_(arenas) {}

  bool planning() const { return plan_ != nullptr; }
  engine::TensorView take(const std::string& category, const std::string& name, engine::DType dtype,
                          const std::vector<int64_t>& shape);
  engine::Workspace take_workspace(const std::string& category, const std::string& name,
                                   size_t bytes);
  // The first allocation error, if any.
  const absl::Status& status() const { return status_; }

 private:
  engine::Arena* arena(const std::string& category);

  engine::MemoryPlan* plan_ = nullptr;
  std::vector<std::pair<std::string, engine::Arena>>* arenas_ = nullptr;
  absl::Status status_;
};

// One arena per non-empty category of `plan` on `device`, named "<what> <category>" (what a
// Carver in creation mode carves the plan's views from).
absl::StatusOr<std::vector<std::pair<std::string, engine::Arena>>> allocate_arenas(
    const engine::MemoryPlan& plan, engine::Device device, const std::string& what);

}  // namespace anvil::model
