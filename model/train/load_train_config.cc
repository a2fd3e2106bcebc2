// parse_train_config and the loaders of train_config.h: the shared sections
// (parse_train_sections, train_config.cc), then the model family's part (its Family::parse,
// model/train/family.h: T5's model keys and pipeline split, GPT's and BERT's layer partition).
// Kept apart from the shared sections so that the family's parser, which fills a TrainConfig,
// and the shared parser do not include each other.
#include <string>
#include <utility>
#include <vector>

#include "engine/status.h"
#include "model/train/family.h"
#include "model/train/seq2seq_keys.h"
#include "model/train/train_config.h"
#include "model/train/train_sections.h"

namespace anvil::model {

using engine::Config;

absl::StatusOr<TrainConfig> parse_train_config(const Config& c, int world_size) {
  ANVIL_ASSIGN_OR_RETURN(TrainConfig t, parse_train_sections(c, world_size));
  ANVIL_RETURN_IF_ERROR(parse_seq2seq_keys(c, t));
  ANVIL_RETURN_IF_ERROR(family_of(t).parse(c, t));
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
