// parse_train_config and the loaders of train_config.h: the shared sections
// (parse_train_sections, train_config.cc), then the model family's part (T5: t5_train_config.cc)
// and, for GPT and BERT, the layer partition over the pipeline chunks. Kept apart from the
// shared sections so that the family's parser, which fills a TrainConfig, and the shared parser
// do not include each other.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "model/train/t5_train_config.h"
#include "model/train/train_config.h"
#include "model/train/train_sections.h"
#include "parallel/parallel_config.h"

namespace anvil::model {

using engine::Config;

absl::StatusOr<TrainConfig> parse_train_config(const Config& c, int world_size) {
  ANVIL_ASSIGN_OR_RETURN(TrainConfig t, parse_train_sections(c, world_size));
  ANVIL_RETURN_IF_ERROR(parse_t5_config(c, t));
  if (t.model.t5()) return t;  // its stacks split by pp_split_rank (parse_t5_config)
  const parallel::ParallelConfig& pc = t.parallel;
  const int64_t chunks = static_cast<int64_t>(pc.pp) * pc.virtual_stages;
  absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
      parallel::partition_layers(t.model.n_layers, chunks, pc.pipeline_partition);
  if (!parts.ok()) {
    return c.error("parallel", "pp",
                   absl::StrFormat("pp %d * virtual_stages %d with [model] n_layers %d: %s", pc.pp,
                                   pc.virtual_stages, t.model.n_layers, parts.status().message()));
  }
  return t;
}

absl::StatusOr<TrainConfig> load_train_config(const std::string& path,
                                              const std::vector<std::string>& overrides,
                                              Config* raw, int world_size) {
  ANVIL_ASSIGN_OR_RETURN(Config c, Config::load_file(path, train_config_schema(), overrides));
  ANVIL_ASSIGN_OR_RETURN(TrainConfig t, parse_train_config(c, world_size));
  if (raw != nullptr) *raw = std::move(c);
  return t;
}

absl::StatusOr<TrainConfig> load_train_config_string(const std::string& text,
                                                     const std::string& name,
                                                     const std::vector<std::string>& overrides,
                                                     Config* raw, int world_size) {
  ANVIL_ASSIGN_OR_RETURN(Config c,
                         Config::load_string(text, name, train_config_schema(), overrides));
  ANVIL_ASSIGN_OR_RETURN(TrainConfig t, parse_train_config(c, world_size));
  if (raw != nullptr) *raw = std::move(c);
  return t;
}

}  // namespace anvil::model
