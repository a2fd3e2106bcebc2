// The families built into anvil, added to the process's model-family registry
// (model/train/family.h) on its first use: the one file that names every family folder. A new
// family adds its line here (docs/models.md, "Adding a model family").
#include "engine/status.h"
#include "model/bert/bert_family.h"
#include "model/gpt/gpt_family.h"
#include "model/t5/t5_family.h"
#include "model/train/family.h"

namespace anvil::model {

absl::Status register_builtin_families(FamilyRegistry& registry) {
  ANVIL_RETURN_IF_ERROR(registry.add(gpt_family()));
  ANVIL_RETURN_IF_ERROR(registry.add(bert_family()));
  ANVIL_RETURN_IF_ERROR(registry.add(t5_family()));
  return absl::OkStatus();
}

}  // namespace anvil::model
