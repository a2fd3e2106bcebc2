// Tests of bin/train's [eval] section (model/train/eval_config.h) through load_train_config_string:
// defaults (no task, stride 32 = Megatron's --overlapping-eval), values parsed, and the errors
// naming the key: an unknown detokenizer, a stride outside 1 .. seq_len, a task without a
// [tokenizer]; a task under tp = 2, pp = 2 or dp = 2 is accepted (it runs on the layout).
// [finetune]: the label list (whitespace trimmed), fewer than two or repeated labels, no
// [tokenizer].
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

constexpr char kBase[] = R"([model]
vocab_size = 257
max_seq_len = 64
d_model = 32
n_heads = 4
n_layers = 2
[data]
path = x
seq_len = 64
[train]
micro_batch = 2
global_batch = 4
)";

absl::StatusOr<TrainConfig> load(const std::vector<std::string>& overrides, int world = 1) {
  return load_train_config_string(kBase, "e.ini", overrides, nullptr, world);
}

std::string error_of(const std::vector<std::string>& overrides, int world = 1) {
  absl::StatusOr<TrainConfig> c = load(overrides, world);
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(EvalConfig, DefaultsAndValues) {
  auto d = load({});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->eval.any());
  EXPECT_EQ(d->eval.text_stride, 32);
  EXPECT_EQ(d->eval.text_detokenizer, "wikitext");
  EXPECT_FALSE(d->eval.strict_lambada);
  auto c = load({"tokenizer.type=Byte", "eval.text=w.txt", "eval.lambada=l.jsonl",
                 "eval.text_stride=64", "eval.text_detokenizer=none", "eval.strict_lambada=true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->eval.any());
  EXPECT_EQ(c->eval.text, "w.txt");
  EXPECT_EQ(c->eval.lambada, "l.jsonl");
  EXPECT_EQ(c->eval.text_stride, 64);
  EXPECT_EQ(c->eval.text_detokenizer, "none");
  EXPECT_TRUE(c->eval.strict_lambada);
}

TEST(EvalConfig, ErrorsNameTheKey) {
  EXPECT_NE(error_of({"eval.text_detokenizer=ptb"}).find("[eval] text_detokenizer: \"ptb\""),
            std::string::npos);
  // The stride is checked with a text only (the default 32 may exceed a short seq_len).
  EXPECT_TRUE(load({"data.seq_len=16"}).ok());
  EXPECT_NE(error_of({"tokenizer.type=Byte", "eval.text=w", "eval.text_stride=65"})
                .find("[eval] text_stride: 65: must be in 1 .. "
                      "[data] seq_len 64"),
            std::string::npos);
  EXPECT_NE(
      error_of({"tokenizer.type=Byte", "eval.text=w", "eval.text_stride=0"}).find("text_stride"),
      std::string::npos);
  EXPECT_NE(error_of({"eval.lambada=l.jsonl"}).find("[eval] lambada: needs a [tokenizer]"),
            std::string::npos);
  for (const char* layout : {"parallel.tp=2", "parallel.pp=2", "parallel.dp=2"}) {
    auto c = load({"tokenizer.type=Byte", "eval.text=w.txt", "eval.lambada=l", layout}, 2);
    EXPECT_TRUE(c.ok()) << layout << ": " << c.status();
  }
}

TEST(FinetuneConfig, LabelsAndErrors) {
  auto c = load({"tokenizer.type=Byte", "finetune.train_data=t.jsonl", "finetune.labels= O , N"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->finetune.train_data, (std::vector<std::string>{"t.jsonl"}));
  EXPECT_EQ(c->finetune.head, FinetuneHead::kLabelWords);
  EXPECT_EQ(c->finetune.classes(), 2);
  EXPECT_EQ(c->finetune.labels, (std::vector<std::string>{"O", "N"}));
  EXPECT_TRUE(load({}).ok());  // no finetuning: nothing required
  EXPECT_NE(error_of({"tokenizer.type=Byte", "finetune.train_data=t", "finetune.labels=O"})
                .find("[finetune] labels: needs at least two distinct"),
            std::string::npos);
  EXPECT_NE(error_of({"tokenizer.type=Byte", "finetune.train_data=t", "finetune.labels=O,O"})
                .find("(1 distinct)"),
            std::string::npos);
  EXPECT_NE(error_of({"finetune.train_data=t", "finetune.labels=O,N"})
                .find("[finetune] train_data: needs a [tokenizer]"),
            std::string::npos);
}

TEST(FinetuneConfig, FormatsTasksAndHeads) {
  auto mnli = load({"tokenizer.type=Byte", "finetune.format=mnli", "finetune.head=linear",
                    "finetune.train_data=a/train.tsv", "finetune.dev_data=m.tsv, mm.tsv"});
  ASSERT_TRUE(mnli.ok()) << mnli.status();
  EXPECT_EQ(mnli->finetune.format, FinetuneFormat::kMnli);
  EXPECT_EQ(mnli->finetune.classes(), 3);
  EXPECT_EQ(mnli->finetune.dev_data, (std::vector<std::string>{"m.tsv", "mm.tsv"}));
  auto race = load({"tokenizer.type=Byte", "finetune.format=race", "finetune.head=linear",
                    "finetune.task=multiple_choice", "finetune.train_data=RACE/train/middle"});
  ASSERT_TRUE(race.ok()) << race.status();
  EXPECT_EQ(race->finetune.task, FinetuneTask::kMultipleChoice);
  EXPECT_EQ(race->finetune.classes(), 4);
  EXPECT_EQ(race->finetune.max_qa_length, 128);
  const std::vector<std::string> base = {"tokenizer.type=Byte", "finetune.train_data=t"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return error_of(more);
  };
  EXPECT_NE(with({"finetune.format=race", "finetune.head=linear"})
                .find("[finetune] task: classification does not fit format race"),
            std::string::npos);
  EXPECT_NE(with({"finetune.task=multiple_choice", "finetune.labels=a,b"})
                .find("task: multiple_choice does not fit format jsonl"),
            std::string::npos);
  EXPECT_NE(with({"finetune.format=race", "finetune.task=multiple_choice"})
                .find("[finetune] head: multiple_choice needs head = linear"),
            std::string::npos);
  EXPECT_NE(with({"finetune.format=qqp", "finetune.head=linear", "finetune.labels=x,y"})
                .find("[finetune] labels: format qqp has fixed labels"),
            std::string::npos);
  EXPECT_NE(with({"finetune.format=mnli"}).find("[finetune] head: format mnli needs head = linear"),
            std::string::npos);
  EXPECT_NE(with({"finetune.format=sst2"}).find("format"), std::string::npos);
  EXPECT_NE(with({"finetune.format=race", "finetune.task=multiple_choice", "finetune.head=linear",
                  "finetune.max_qa_length=0"})
                .find("[finetune] max_qa_length: must be >= 1"),
            std::string::npos);
}

}  // namespace
}  // namespace anvil::model
