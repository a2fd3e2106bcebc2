// bin/train's config: defaults, overrides, one-line errors naming the problem for malformed ini,
// unknown keys, bad values and inconsistent combinations; the missing-data error; every file in
// configs/ validates; docs/config.md equals the generated schema documentation.
#include "model/train/train_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::model {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The repository root: tests run from it under CTest; otherwise derive it from this file's path.
std::filesystem::path repo_root() {
  if (std::filesystem::exists("docs/config.md") && std::filesystem::exists("configs")) {
    return std::filesystem::current_path();
  }
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

constexpr char kValid[] = R"(# a small model
[model]
vocab_size = 257
max_seq_len = 128
d_model = 64
n_heads = 4
n_layers = 2

[data]
path = data/demo/kjv_text_document
seq_len = 64

[train]
micro_batch = 4
global_batch = 8
steps = 100

[optim]
lr = 1e-3
min_lr = 1e-4
warmup_steps = 10
)";

absl::StatusOr<TrainConfig> load(const std::string& text,
                                 const std::vector<std::string>& overrides = {}) {
  return load_train_config_string(text, "test.ini", overrides);
}

// The error message of loading `text` (with overrides); fails the test when it loads.
std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<TrainConfig> c = load(text, overrides);
  EXPECT_FALSE(c.ok()) << "expected an error";
  if (c.ok()) return "";
  const std::string msg(c.status().message());
  EXPECT_THAT(msg, Not(HasSubstr("\n"))) << "errors must be one line";
  return msg;
}

TEST(TrainConfigTest, ParsesValuesAndDefaults) {
  absl::StatusOr<TrainConfig> c = load(kValid);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.vocab_size, 257);
  EXPECT_EQ(c->model.d_model, 64);
  EXPECT_EQ(c->model.padded(), 384);
  EXPECT_EQ(c->model.ffn(), 256);
  EXPECT_EQ(c->data.path, "data/demo/kjv_text_document");
  EXPECT_EQ(c->data.split, "969,30,1");
  EXPECT_EQ(c->data.seq_len, 64);
  EXPECT_EQ(c->train.accumulation_steps(), 2);
  EXPECT_EQ(c->train.device, "auto");
  EXPECT_DOUBLE_EQ(c->optim.schedule.lr, 1e-3);
  EXPECT_EQ(c->optim.schedule.decay_steps, 100);  // 0 = steps
  EXPECT_EQ(c->optim.schedule.style, DecayStyle::kCosine);
  EXPECT_DOUBLE_EQ(c->optim.clip_grad, 1.0);
  EXPECT_FALSE(c->log.all_ranks);
}

TEST(TrainConfigTest, GlobalBatchDefaultsToMicroBatch) {
  absl::StatusOr<TrainConfig> c = load("[train]\nmicro_batch = 6\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.global_batch, 6);
  EXPECT_EQ(c->train.accumulation_steps(), 1);
}

TEST(TrainConfigTest, OverridesApplyInOrder) {
  absl::StatusOr<TrainConfig> c =
      load(kValid, {"train.steps=70", "optim.decay_style=linear", "train.steps=90"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.steps, 90);
  EXPECT_EQ(c->optim.schedule.style, DecayStyle::kLinear);
  EXPECT_EQ(c->optim.schedule.decay_steps, 90);
}

TEST(TrainConfigTest, MalformedIniIsAnError) {
  EXPECT_THAT(error_of("[model]\nd_model 64\n"), HasSubstr("test.ini:2"));
  EXPECT_THAT(error_of("[model\nd_model = 64\n"), HasSubstr("test.ini"));
}

TEST(TrainConfigTest, UnknownSectionOrKeyIsAnError) {
  EXPECT_THAT(error_of("[model]\nd_modle = 64\n"),
              AllOf(HasSubstr("test.ini:2"), HasSubstr("d_modle")));
  EXPECT_THAT(error_of("[parallel]\ntp = 2\n"), HasSubstr("parallel"));
  EXPECT_THAT(error_of(kValid, {"train.stepz=3"}), HasSubstr("stepz"));
}

TEST(TrainConfigTest, BadValueIsAnError) {
  EXPECT_THAT(error_of("[train]\nsteps = ten\n"), AllOf(HasSubstr("steps"), HasSubstr("ten")));
  EXPECT_THAT(error_of("[optim]\nlr = fast\n"), AllOf(HasSubstr("lr"), HasSubstr("fast")));
  EXPECT_THAT(error_of("[train]\ndevice = tpu\n"), AllOf(HasSubstr("device"), HasSubstr("tpu")));
  EXPECT_THAT(error_of("[optim]\ndecay_style = exponential\n"), HasSubstr("exponential"));
  EXPECT_THAT(error_of("[log]\nall_ranks = maybe\n"), HasSubstr("maybe"));
  EXPECT_THAT(error_of(kValid, {"train.micro_batch=x"}),
              AllOf(HasSubstr("micro_batch"), HasSubstr("override")));
}

// [model] architecture keys (docs/models.md): GPT-2 by default, each value parsed, unknown values
// and unsupported combinations refused naming the key.
TEST(TrainConfigTest, ArchitectureKeys) {
  absl::StatusOr<TrainConfig> c = load(kValid);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.position_embedding, PositionEmbedding::kLearned);
  EXPECT_EQ(c->model.activation, Activation::kGelu);
  EXPECT_EQ(c->model.norm, Norm::kLayerNorm);
  EXPECT_TRUE(c->model.bias);
  EXPECT_TRUE(c->model.tie_embeddings);
  EXPECT_FALSE(c->model.embed_layernorm);
  c = load(kValid, {"model.position_embedding=rotary", "model.rotary_base=500000",
                    "model.rotary_percent=0.5", "model.activation=swiglu", "model.norm=rmsnorm",
                    "model.bias=false", "model.tie_embeddings=false"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.position_embedding, PositionEmbedding::kRotary);
  EXPECT_EQ(c->model.rotary_base, 500000.0f);
  EXPECT_EQ(c->model.rotary_percent, 0.5f);
  EXPECT_EQ(c->model.activation, Activation::kSwiglu);
  EXPECT_EQ(c->model.norm, Norm::kRmsNorm);
  EXPECT_FALSE(c->model.bias);
  EXPECT_FALSE(c->model.tie_embeddings);
  c = load(kValid, {"model.position_embedding=alibi", "model.embed_layernorm=true",
                    "model.activation=geglu"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.position_embedding, PositionEmbedding::kAlibi);
  EXPECT_TRUE(c->model.embed_layernorm);
  EXPECT_EQ(c->model.activation, Activation::kGeglu);
  EXPECT_THAT(error_of(kValid, {"model.position_embedding=sinusoidal"}),
              AllOf(HasSubstr("position_embedding"), HasSubstr("sinusoidal")));
  EXPECT_THAT(error_of(kValid, {"model.activation=silu"}), HasSubstr("silu"));
  EXPECT_THAT(error_of(kValid, {"model.norm=batchnorm"}), HasSubstr("batchnorm"));
  EXPECT_THAT(error_of(kValid, {"model.embed_layernorm=true"}), HasSubstr("embed_layernorm"));
  // head_dim 16: rotary_percent 0.1 rotates 1 dim (odd).
  EXPECT_THAT(error_of(kValid, {"model.position_embedding=rotary", "model.rotary_percent=0.1"}),
              HasSubstr("rotary_percent"));
}

TEST(TrainConfigTest, OutOfRangeValuesNameTheKey) {
  EXPECT_THAT(error_of("[model]\nn_layers = 0\n"),
              AllOf(HasSubstr("[model] n_layers"), HasSubstr("> 0"), HasSubstr("0")));
  EXPECT_THAT(error_of("[train]\nmicro_batch = -2\n"),
              AllOf(HasSubstr("test.ini:2"), HasSubstr("[train] micro_batch"), HasSubstr("-2")));
  EXPECT_THAT(error_of("[model]\nhidden_dropout = 1.5\n"),
              AllOf(HasSubstr("hidden_dropout"), HasSubstr("1.5")));
  EXPECT_THAT(error_of("[optim]\nbeta2 = 1.0\n"), HasSubstr("beta2"));
  EXPECT_THAT(error_of("[optim]\nclip_grad = -1\n"), HasSubstr("clip_grad"));
  EXPECT_THAT(error_of("[data]\nsplit = 90,x\n"), AllOf(HasSubstr("split"), HasSubstr("90,x")));
  EXPECT_THAT(error_of("[data]\nsplit = 0,0,0\n"), HasSubstr("split"));
}

TEST(TrainConfigTest, InconsistentCombinationsNameKeysAndNumbers) {
  EXPECT_THAT(error_of(kValid, {"train.global_batch=10"}),
              AllOf(HasSubstr("[train] global_batch"), HasSubstr("10"), HasSubstr("micro_batch 4"),
                    HasSubstr("override")));
  EXPECT_THAT(error_of(kValid, {"data.seq_len=256"}),
              AllOf(HasSubstr("[data] seq_len"), HasSubstr("256"), HasSubstr("max_seq_len 128")));
  EXPECT_THAT(error_of(kValid, {"model.n_heads=5"}),
              AllOf(HasSubstr("n_heads"), HasSubstr("d_model 64"), HasSubstr("5")));
  EXPECT_THAT(error_of(kValid, {"optim.min_lr=1e-2"}),
              AllOf(HasSubstr("[optim] min_lr"), HasSubstr("0.01"), HasSubstr("lr 0.001")));
  EXPECT_THAT(error_of(kValid, {"optim.warmup_steps=100"}),
              AllOf(HasSubstr("warmup_steps"), HasSubstr("100")));
  EXPECT_THAT(error_of(kValid, {"optim.decay_steps=5"}),
              AllOf(HasSubstr("warmup_steps"), HasSubstr("10"), HasSubstr("5")));
  EXPECT_THAT(error_of(kValid, {"model.padded_vocab=200"}),
              AllOf(HasSubstr("padded_vocab"), HasSubstr("200"), HasSubstr("257")));
  // Constant lr needs no decay phase, so a warmup as long as the run is fine.
  EXPECT_TRUE(load(kValid, {"optim.warmup_steps=100", "optim.decay_style=constant"}).ok());
}

// Sizes from the config are bounded before any product is formed (engine/checked_math.h): the
// cases of issue 14 that used to wrap, hang or throw.
TEST(TrainConfigTest, HugeDimensionsNameTheKeyAndTheLimit) {
  EXPECT_THAT(error_of(kValid, {"model.max_seq_len=288230376151711744"}),
              AllOf(HasSubstr("[model] max_seq_len"), HasSubstr("288230376151711744"),
                    HasSubstr("limit 2^31 - 1")));
  EXPECT_THAT(error_of(kValid, {"model.max_seq_len=9223372036854775807"}),
              AllOf(HasSubstr("[model] max_seq_len"), HasSubstr("limit 2^31 - 1")));
  EXPECT_THAT(error_of(kValid, {"model.d_model=4611686018427387904", "model.n_heads=1"}),
              AllOf(HasSubstr("[model] d_model"), HasSubstr("limit 2^31 - 1")));
  EXPECT_THAT(error_of(kValid, {"model.vocab_size=2147483648"}),
              AllOf(HasSubstr("[model] vocab_size"), HasSubstr("limit 2^31 - 1")));
  EXPECT_THAT(
      error_of(kValid, {"model.n_layers=4000000000000"}),
      AllOf(HasSubstr("[model] n_layers"), HasSubstr("4000000000000"), HasSubstr("limit 2^16")));
  EXPECT_TRUE(load(kValid, {"model.n_layers=65536"}).ok());
}

TEST(TrainConfigTest, HugeProductsNameTheKeysAndTheLimit) {
  // Every dimension fits int32, but a QKV weight of 3 d^2 elements does not fit 2^44.
  EXPECT_THAT(
      error_of(kValid, {"model.d_model=2147483520", "model.n_heads=1", "model.ffn_hidden=128"}),
      AllOf(HasSubstr("3 * d_model"), HasSubstr("2147483520"), HasSubstr("2^44")));
  // 2^16 layers of d_model 2^14: 2^16 * 12 * 2^28 parameters.
  EXPECT_THAT(error_of(kValid, {"model.d_model=16384", "model.n_layers=65536"}),
              AllOf(HasSubstr("n_layers 65536"), HasSubstr("d_model 16384"),
                    HasSubstr("2^44 = 17592186044416 parameters")));
}

TEST(TrainConfigTest, HugeBatchesAndSampleCountsNameTheKeysAndTheLimit) {
  EXPECT_THAT(error_of(kValid, {"train.micro_batch=2147483648"}),
              AllOf(HasSubstr("[train] micro_batch"), HasSubstr("limit 2^31 - 1")));
  EXPECT_THAT(error_of(kValid, {"train.micro_batch=1073741824", "train.global_batch=1073741824",
                                "model.max_seq_len=1048576", "data.seq_len=1048576"}),
              AllOf(HasSubstr("[train] global_batch"), HasSubstr("seq_len 1048576"),
                    HasSubstr("tokens per step exceed the limit 2^44")));
  EXPECT_THAT(error_of(kValid, {"train.steps=9223372036854775807"}),
              AllOf(HasSubstr("[train] steps"), HasSubstr("limit 2^40")));
  EXPECT_THAT(error_of(kValid, {"train.steps=549755813888"}),  // 2^39 steps x 8 samples
              AllOf(HasSubstr("[train] steps"), HasSubstr("global_batch 8"),
                    HasSubstr("training samples exceed the limit 2^40")));
  EXPECT_THAT(error_of(kValid, {"train.eval_iters=1099511627776"}),  // 2^40 x 1 eval x 8
              AllOf(HasSubstr("[train] eval_iters"), HasSubstr("validation samples")));
}

// GptConfig::validate bounds the sizes for callers that build the struct without an ini file.
TEST(TrainConfigTest, GptConfigValidateBoundsSizes) {
  GptConfig m;
  EXPECT_TRUE(m.validate().ok());
  m.vocab_multiple = 0;  // would divide by zero in padded()
  EXPECT_THAT(std::string(m.validate().message()), HasSubstr("vocab_multiple 0"));
  m = GptConfig{};
  m.max_seq_len = int64_t{1} << 58;
  EXPECT_THAT(std::string(m.validate().message()),
              AllOf(HasSubstr("max_seq_len 288230376151711744"), HasSubstr("2^31 - 1")));
  m = GptConfig{};
  m.n_layers = 4000000000000;
  EXPECT_THAT(std::string(m.validate().message()), HasSubstr("n_layers 4000000000000"));
  m = GptConfig{};
  m.padded_vocab = 2147483647;  // padded vocabulary x d_model 16384 > 2^44
  m.d_model = 16384;
  m.n_heads = 16;
  EXPECT_THAT(std::string(m.validate().message()),
              AllOf(HasSubstr("padded vocabulary 2147483647 x d_model 16384"), HasSubstr("2^44")));
}

// A micro-batch whose largest activation (the logits, B*T x padded vocab) exceeds 2^44
// elements is refused at plan time, before anything is allocated.
TEST(TrainConfigTest, HugeMicroBatchIsRefusedByThePlan) {
  absl::StatusOr<TrainConfig> c =
      load(kValid,
           {"train.micro_batch=1073741824", "train.global_batch=1073741824", "data.seq_len=128"});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<engine::MemoryPlan> plan =
      GptModel::plan(c->model, GptRunShape{c->train.micro_batch, c->data.seq_len}, Precision{});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              AllOf(HasSubstr("micro_batch 1073741824"), HasSubstr("seq_len 128"), HasSubstr("384"),
                    HasSubstr("2^44")));
}

TEST(TrainConfigTest, AbsurdLearningRateAndSkipLimit) {
  EXPECT_THAT(error_of(kValid, {"optim.lr=1e300"}),
              AllOf(HasSubstr("[optim] lr"), HasSubstr("1e+300"), HasSubstr("limit 10")));
  EXPECT_THAT(error_of(kValid, {"optim.lr=10.5"}), HasSubstr("[optim] lr"));
  EXPECT_TRUE(load(kValid, {"optim.lr=10"}).ok());
  EXPECT_THAT(error_of(kValid, {"train.max_skipped_steps=-1"}),
              HasSubstr("[train] max_skipped_steps"));
  absl::StatusOr<TrainConfig> c = load(kValid, {"train.max_skipped_steps=0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.max_skipped_steps, 0);
  EXPECT_TRUE(c->train.check_memory);
}

TEST(TrainConfigTest, MissingDataFileNamesPathAndExpectedFiles) {
  const absl::Status s = check_data_files("/nonexistent/dir/corpus_text_document");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  const std::string msg(s.message());
  EXPECT_THAT(msg, AllOf(HasSubstr("/nonexistent/dir/corpus_text_document.bin"),
                         HasSubstr("/nonexistent/dir/corpus_text_document.idx"),
                         HasSubstr("bin/preprocess"), Not(HasSubstr("\n"))));
  EXPECT_THAT(std::string(check_data_files("").message()), HasSubstr("[data] path"));

  // Only the .idx present: the message names the missing .bin.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "anvil_cfg_test";
  std::filesystem::create_directories(dir);
  const std::string prefix = (dir / "half").string();
  std::ofstream(prefix + ".idx") << "x";
  std::filesystem::remove(prefix + ".bin");
  EXPECT_THAT(std::string(check_data_files(prefix).message()),
              HasSubstr("data file " + prefix + ".bin not found"));
  std::ofstream(prefix + ".bin") << "x";
  EXPECT_TRUE(check_data_files(prefix).ok());
  std::filesystem::remove_all(dir);
}

TEST(TrainConfigTest, DataPathsEodOptionsAndSeed) {
  auto single = load(kValid);
  ASSERT_TRUE(single.ok());
  ASSERT_EQ(single->data.sources.size(), 1u);
  EXPECT_EQ(single->data.sources[0].prefix, "data/demo/kjv_text_document");
  EXPECT_FALSE(single->data.weighted);
  EXPECT_EQ(single->data.eod_token, 50256);

  std::string blended = kValid;
  blended.replace(blended.find("path = "), 7, "paths = 0.7 a_text_document  0.3 ");
  auto b = load(blended);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->data.sources.size(), 2u);
  EXPECT_TRUE(b->data.weighted);
  EXPECT_DOUBLE_EQ(b->data.sources[0].weight, 0.7);
  EXPECT_EQ(b->data.sources[0].prefix, "a_text_document");
  EXPECT_EQ(b->data.sources[1].prefix, "data/demo/kjv_text_document");
  // A command-line data.path beats the file's paths (scripts override data.path).
  auto o = load(blended, {"data.path=x_document"});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->data.sources.size(), 1u);
  EXPECT_EQ(o->data.sources[0].prefix, "x_document");
  EXPECT_THAT(error_of(blended + "[data]\npath = y\n"),
              HasSubstr("path is an alias of paths, which is also set"));
  EXPECT_THAT(error_of(kValid, {"data.path=0.7 a 0.3"}),
              AllOf(HasSubstr("[data] path"), HasSubstr("3 words")));
  EXPECT_THAT(error_of(kValid, {"data.path=x a 0.3 b"}), HasSubstr("\"x\""));
  EXPECT_THAT(error_of(kValid, {"data.path=0 a 0 b"}), HasSubstr("sum to 0"));
  auto v = load(kValid, {"data.valid_paths=v_document"});
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->data.valid_sources.size(), 1u);

  EXPECT_THAT(error_of(kValid, {"data.seed=4294967296"}), HasSubstr("2^32"));
  EXPECT_TRUE(load(kValid, {"data.seed=4294967295"}).ok());
  EXPECT_THAT(error_of(kValid, {"data.reset_attention_mask=true"}),
              AllOf(HasSubstr("eod_token"), HasSubstr("50256")));
  auto mask = load(kValid, {"data.reset_attention_mask=true", "data.eod_token=256"});
  ASSERT_TRUE(mask.ok()) << mask.status();
  EXPECT_TRUE(mask->data.reset_attention_mask);
  // vocab 257: GPT-2's default eod would never match, so the options need eod_token = 256.
  EXPECT_THAT(error_of(kValid, {"data.eod_mask_loss=true"}),
              AllOf(HasSubstr("eod_token"), HasSubstr("50256")));
  auto eod = load(
      kValid, {"data.eod_mask_loss=true", "data.reset_position_ids=true", "data.eod_token=256"});
  ASSERT_TRUE(eod.ok()) << eod.status();
  EXPECT_TRUE(eod->data.eod_mask_loss && eod->data.reset_position_ids);
  // Prefix-LM: loss_on_targets_only belongs to it; GPT only.
  auto prefix = load(kValid, {"data.prefix_lm=true", "data.loss_on_targets_only=true"});
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_TRUE(prefix->data.prefix_lm && prefix->data.loss_on_targets_only);
  EXPECT_THAT(error_of(kValid, {"data.loss_on_targets_only=true"}),
              AllOf(HasSubstr("[data] loss_on_targets_only"), HasSubstr("prefix_lm")));
  EXPECT_THAT(error_of(kValid, {"data.prefix_lm=true", "model.type=bert"}),
              HasSubstr("[data] prefix_lm"));
  // Reweighting and the normalizer belong to prefix_lm; the fork's GPTModelPipe division is
  // the default.
  EXPECT_EQ(prefix->data.prefix_lm_normalizer, DataConfig::PrefixLmNormalizer::kPipe);
  EXPECT_FALSE(prefix->data.reweight_loss);
  auto rw =
      load(kValid, {"data.prefix_lm=true", "data.reweight_loss_based_on_position_frequency=true",
                    "data.prefix_lm_normalizer=mask_sum"});
  ASSERT_TRUE(rw.ok()) << rw.status();
  EXPECT_TRUE(rw->data.reweight_loss);
  EXPECT_EQ(rw->data.prefix_lm_normalizer, DataConfig::PrefixLmNormalizer::kMaskSum);
  EXPECT_THAT(
      error_of(kValid, {"data.reweight_loss_based_on_position_frequency=true"}),
      AllOf(HasSubstr("reweight_loss_based_on_position_frequency"), HasSubstr("prefix_lm")));
  EXPECT_THAT(error_of(kValid, {"data.prefix_lm_normalizer=mask_sum"}),
              AllOf(HasSubstr("prefix_lm_normalizer"), HasSubstr("prefix_lm")));
  EXPECT_THAT(error_of(kValid, {"data.prefix_lm=true", "data.prefix_lm_normalizer=mean"}),
              HasSubstr("prefix_lm_normalizer"));
}

// [data] mtf (packed T0/MTF finetuning): ALiBi or rotary positions as the fork requires, a pad
// token in the vocabulary, one unweighted prefix, and none of the other loss / mask recipes.
TEST(TrainConfigTest, MtfKeys) {
  const std::vector<std::string> ok = {"data.mtf=true", "data.pad_token=3",
                                       "model.position_embedding=alibi"};
  auto mtf = load(kValid, ok);
  ASSERT_TRUE(mtf.ok()) << mtf.status();
  EXPECT_TRUE(mtf->data.mtf);
  EXPECT_EQ(mtf->data.pad_token, 3);
  auto with = [&ok](std::vector<std::string> more) {
    more.insert(more.begin(), ok.begin(), ok.end());
    return more;
  };
  EXPECT_THAT(error_of(kValid, {"data.mtf=true", "data.pad_token=3"}),
              AllOf(HasSubstr("[data] mtf"), HasSubstr("alibi or rotary")));
  EXPECT_THAT(error_of(kValid, {"data.mtf=true", "model.position_embedding=rotary"}),
              AllOf(HasSubstr("[data] pad_token"), HasSubstr("got -1")));
  EXPECT_THAT(error_of(kValid, with({"data.pad_token=257"})), HasSubstr("[data] pad_token"));
  EXPECT_THAT(error_of(kValid, with({"model.type=bert"})), HasSubstr("[data] mtf"));
  for (const char* key : {"prefix_lm", "reset_attention_mask"}) {
    EXPECT_THAT(error_of(kValid, with({absl::StrCat("data.", key, "=true"), "data.eod_token=256"})),
                AllOf(HasSubstr(absl::StrCat("[data] ", key)), HasSubstr("mtf")));
  }
  EXPECT_THAT(error_of(kValid, with({"data.paths=0.5 a 0.5 b"})),
              AllOf(HasSubstr("[data] mtf"), HasSubstr("one unweighted")));
  EXPECT_THAT(error_of(kValid, with({"curriculum.enabled=true", "curriculum.max_difficulty=64",
                                     "curriculum.total_curriculum_step=10"})),
              AllOf(HasSubstr("[curriculum] enabled"), HasSubstr("mtf")));
}

TEST(TrainConfigTest, ResolvesDevice) {
  absl::StatusOr<Precision> cpu = resolve_precision("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->device, engine::Device::kCpu);
  EXPECT_EQ(cpu->act, engine::DType::kF32);
  absl::StatusOr<Precision> a = resolve_precision("auto");
  ASSERT_TRUE(a.ok());
  if (engine::cuda_device_count() > 0) {
    EXPECT_EQ(a->device, engine::Device::kCuda);
    EXPECT_EQ(a->act, engine::DType::kBF16);
    EXPECT_EQ(a->grad, engine::DType::kF32);
  } else {
    EXPECT_EQ(a->device, engine::Device::kCpu);
    EXPECT_THAT(std::string(resolve_precision("cuda").status().message()),
                HasSubstr("no CUDA device"));
  }
}

TEST(TrainConfigTest, EveryBundledConfigValidates) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(repo_root() / "configs")) {
    if (e.path().extension() != ".ini") continue;
    // A cluster config validates for the world it was written for.
    const int world = e.path().filename() == "tr11_bloom_176b.ini" ? 384 : 1;
    absl::StatusOr<TrainConfig> c = load_train_config(e.path().string(), {}, nullptr, world);
    EXPECT_TRUE(c.ok()) << e.path() << ": " << c.status();
    ++n;
  }
  EXPECT_GE(n, 5);
}

TEST(TrainConfigTest, DocsMatchTheSchema) {
  const std::filesystem::path path = repo_root() / "docs" / "config.md";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), config_docs_markdown())
      << path << " is stale: regenerate it with `build/bin/train --print-config-docs > "
      << "docs/config.md`";
  // Every key is documented.
  for (const engine::ConfigSchema::Key& k : train_config_schema().keys()) {
    EXPECT_THAT(ss.str(), HasSubstr(k.key)) << k.section << "." << k.key;
  }
}

}  // namespace
}  // namespace anvil::model
