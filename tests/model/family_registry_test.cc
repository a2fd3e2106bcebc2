// The model-family registry (model/train/family.h): the built-in families are found by their
// [model] type with every hook set; an unknown type is refused naming the known ones; a registry
// refuses a family without a type, with a hook missing, or registered twice; a family a test
// adds is found by TrainConfig::family; parsed configs reach their family (T5's pipeline split,
// BERT's refusal of [eval] tasks, GPT's refusal of pp_split_rank) and its checkpoint record.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/train/arch_record.h"
#include "model/train/checkpoint.h"
#include "model/train/family.h"
#include "model/train/model_tensors.h"

namespace anvil::model {
namespace {

// A family whose hooks are all set (and never called here).
Family stub_family(const std::string& type) {
  Family f;
  f.type = type;
  f.title = "Stub";
  f.record_width = [](const TrainConfig& cfg) { return cfg.data.seq_len; };
  f.parse = [](const engine::Config&, TrainConfig&) { return absl::OkStatus(); };
  f.summary = [](const TrainConfig&) { return std::string("model: stub"); };
  f.activation_slots = [](const TrainConfig&, const ModelPlace&) -> absl::StatusOr<int64_t> {
    return 1;
  };
  f.plan = [](const TrainConfig&, const Precision&,
              const ModelPlace&) -> absl::StatusOr<engine::MemoryPlan> {
    return engine::MemoryPlan{};
  };
  f.offload_bytes = [](const TrainConfig&, const Precision&,
                       const ModelPlace&) -> absl::StatusOr<size_t> { return size_t{0}; };
  f.create = [](const TrainConfig&, const Precision&,
                const ModelPlace&) -> absl::StatusOr<std::unique_ptr<Model>> {
    return absl::UnimplementedError("stub");
  };
  f.model_record = [](const TrainConfig&, std::map<std::string, std::string>& r) {
    r["width"] = "7";
  };
  f.tensor_shapes = [](const TrainConfig&) {
    return std::map<std::string, std::vector<int64_t>>{{"w", {7}}};
  };
  f.layers = [](const TrainConfig&) { return std::string("no layers"); };
  f.layout_record = [](const TrainConfig&, std::map<std::string, int64_t>&) {};
  return f;
}

TEST(FamilyRegistryTest, BuiltinFamiliesByType) {
  for (const char* type : {"gpt", "bert", "t5"}) {
    absl::StatusOr<const Family*> f = find_family(type);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->type, type);
  }
  EXPECT_EQ((*find_family("gpt"))->samples, SampleLayout::kTokens);
  EXPECT_EQ((*find_family("bert"))->samples, SampleLayout::kBertPair);
  EXPECT_EQ((*find_family("t5"))->samples, SampleLayout::kT5Spans);
  EXPECT_TRUE((*find_family("gpt"))->causal_lm);
  EXPECT_FALSE((*find_family("bert"))->causal_lm);
  EXPECT_FALSE((*find_family("t5"))->causal_lm);
  EXPECT_TRUE((*find_family("bert"))->pooled_cls);
  EXPECT_TRUE((*find_family("gpt"))->uses_embedding_group);
  EXPECT_FALSE((*find_family("t5"))->uses_embedding_group);
}

TEST(FamilyRegistryTest, UnknownTypeNamesTheKnownOnes) {
  absl::StatusOr<const Family*> f = find_family("gtp");
  ASSERT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("'gtp'"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("known types: bert, gpt, t5"), std::string::npos)
      << f.status();
}

TEST(FamilyRegistryTest, RefusesIncompleteOrDuplicateFamilies) {
  FamilyRegistry r;
  EXPECT_EQ(r.add(stub_family("")).code(), absl::StatusCode::kInvalidArgument);
  Family missing = stub_family("stub");
  missing.create = nullptr;
  EXPECT_EQ(r.add(missing).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.add(stub_family("stub")).ok());
  EXPECT_EQ(r.add(stub_family("stub")).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(register_builtin_families(r).ok());
  EXPECT_EQ(r.types(), (std::vector<std::string>{"bert", "gpt", "stub", "t5"}));
  EXPECT_EQ(register_builtin_families(r).code(), absl::StatusCode::kAlreadyExists);
}

TEST(FamilyRegistryTest, AddedFamilyServesItsConfigs) {
  static const bool added = family_registry().add(stub_family("registry_test_stub")).ok();
  ASSERT_TRUE(added);
  TrainConfig cfg;
  cfg.family = "registry_test_stub";
  EXPECT_EQ(&family_of(cfg), *find_family("registry_test_stub"));
  const std::map<std::string, std::string> record = checkpoint_model_record(cfg);
  EXPECT_EQ(record.at("type"), "registry_test_stub");
  EXPECT_EQ(record.at("width"), "7");
  EXPECT_EQ(model_tensor_shapes(cfg), (std::map<std::string, std::vector<int64_t>>{{"w", {7}}}));
  const absl::Status s = check_model_tensors(cfg, {}, "HERE");
  EXPECT_NE(s.message().find("no layers"), std::string::npos) << s;
  TrainConfig gpt;
  EXPECT_EQ(family_of(gpt).type, "gpt");
  gpt.family = "t5";
  EXPECT_EQ(family_of(gpt).type, "t5");
}

TEST(FamilyRegistryTest, ParsedConfigsReachTheirFamily) {
  const std::string bert =
      "[model]\ntype = bert\nvocab_size = 64\nmax_seq_len = 16\nd_model = 16\nn_heads = 2\n"
      "n_layers = 2\ntype_vocab_size = 2\n[data]\nseq_len = 16\n"
      "[train]\nmicro_batch = 1\nglobal_batch = 1\n";
  absl::StatusOr<TrainConfig> b = load_train_config_string(bert, "bert.ini", {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(family_of(*b).type, "bert");
  EXPECT_EQ(family_of(*b).record_width(*b), 5 * 16 + 1);
  EXPECT_EQ(checkpoint_model_record(*b).at("type"), "bert");
  EXPECT_EQ(checkpoint_model_record(*b).at("type_vocab_size"), "2");
  // GPT's parse refuses T5's pipeline split.
  const std::string gpt =
      "[model]\nvocab_size = 64\nmax_seq_len = 16\nd_model = 16\nn_heads = 2\nn_layers = 2\n"
      "[data]\nseq_len = 16\n[train]\nmicro_batch = 1\nglobal_batch = 1\n";
  absl::StatusOr<TrainConfig> g =
      load_train_config_string(gpt, "gpt.ini", {"parallel.pp_split_rank=1"});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("is for [model] type = t5 only"), std::string::npos)
      << g.status();
  g = load_train_config_string(gpt, "gpt.ini", {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(family_of(*g).record_width(*g), 17);
  EXPECT_EQ(checkpoint_layout(*g).count("pp_split_rank"), 0u);
}

// The shared [data] rules ask the family, not the type: eod handling only for token streams,
// prefix-LM only for a causal LM.
TEST(FamilyRegistryTest, DataRulesFollowTheFamily) {
  const std::string bert =
      "[model]\ntype = bert\nvocab_size = 64\nmax_seq_len = 16\nd_model = 16\nn_heads = 2\n"
      "n_layers = 2\ntype_vocab_size = 2\n[data]\nseq_len = 16\n"
      "[train]\nmicro_batch = 1\nglobal_batch = 1\n";
  for (const char* key : {"eod_mask_loss", "reset_position_ids", "reset_attention_mask"}) {
    absl::StatusOr<TrainConfig> b =
        load_train_config_string(bert, "bert.ini", {absl::StrCat("data.", key, "=true")});
    ASSERT_FALSE(b.ok()) << key;
    EXPECT_NE(b.status().message().find(key), std::string::npos) << b.status();
    EXPECT_NE(b.status().message().find("type bert samples have no eod"), std::string::npos)
        << b.status();
  }
  absl::StatusOr<TrainConfig> p =
      load_train_config_string(bert, "bert.ini", {"data.prefix_lm=true"});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("prefix_lm"), std::string::npos) << p.status();
  const std::string gpt =
      "[model]\nvocab_size = 64\nmax_seq_len = 16\nd_model = 16\nn_heads = 2\nn_layers = 2\n"
      "[data]\nseq_len = 16\neod_token = 3\n[train]\nmicro_batch = 1\nglobal_batch = 1\n";
  EXPECT_TRUE(load_train_config_string(gpt, "gpt.ini", {"data.eod_mask_loss=true"}).ok());
  EXPECT_TRUE(load_train_config_string(gpt, "gpt.ini", {"data.prefix_lm=true"}).ok());
}

}  // namespace
}  // namespace anvil::model
