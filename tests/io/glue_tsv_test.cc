// Tests of the GLUE (MNLI, QQP) and RACE readers, their text helpers and the tokenized task
// data (io/glue_tsv.h, io/race.h, io/task_text.h, io/task_data.h) on the fixtures in
// tests/io/fixtures/tasks (written by hand in Megatron's layouts). Expected texts and labels are
// spelled out from the fixture files and Megatron's rules (clean_text, the "_" blank of RACE); bad
// files give errors naming file and line.
#include "io/glue_tsv.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/byte_tokenizer.h"
#include "io/race.h"
#include "io/task_data.h"
#include "io/task_text.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

std::string fixture(const std::string& name) { return testing::fixture_dir() + "/tasks/" + name; }

TEST(TaskText, CleanTextAsMegatron) {
  EXPECT_EQ(clean_text("a\nb  \t c"), "a b c");
  EXPECT_EQ(clean_text("Paris . The end ."), "Paris. The end .");
  // Overlapping matches need the repeated passes (Python: "a . . . x" -> "a. . x" -> "a. .. x").
  EXPECT_EQ(clean_text("a . . . x"), "a. .. x");
  EXPECT_EQ(clean_text(""), "");
}

TEST(TaskText, PairTokensCapAndSeparator) {
  EXPECT_EQ(pair_tokens({1, 2}, {3}, 10, 9), (std::vector<int32_t>{1, 2, 9, 3, 9}));
  EXPECT_EQ(pair_tokens({1, 2}, {}, 10, 9), (std::vector<int32_t>{1, 2, 9}));
  // 1 2 9 3 4 5 = 6 tokens >= 5: the first 4 kept, then the separator.
  EXPECT_EQ(pair_tokens({1, 2}, {3, 4, 5}, 5, 9), (std::vector<int32_t>{1, 2, 9, 3, 9}));
  // Exactly max_len is cut too (Megatron's >=).
  EXPECT_EQ(pair_tokens({1, 2, 3, 4}, {}, 4, 9), (std::vector<int32_t>{1, 2, 3, 9}));
}

TEST(TaskText, BertPairTokensAsMegatron) {
  // [CLS]=1 a [SEP]=2 b [SEP], types 0 0 0 0 | 1 1 1.
  TokenTypes t = bert_pair_tokens({5, 6}, {7, 8}, true, 10, 1, 2);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 5, 6, 2, 7, 8, 2}));
  EXPECT_EQ(t.types, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1}));
  // Without b and not cut: no final [SEP] (Megatron appends it only with b or after a cut).
  t = bert_pair_tokens({5, 6}, {}, false, 10, 1, 2);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 5, 6, 2}));
  EXPECT_EQ(t.types, (std::vector<int32_t>{0, 0, 0, 0}));
  // 1 5 6 2 7 8 9 = 7 tokens >= 6: the first 5, then [SEP] of type 1.
  t = bert_pair_tokens({5, 6}, {7, 8, 9}, true, 6, 1, 2);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 5, 6, 2, 7, 2}));
  EXPECT_EQ(t.types, (std::vector<int32_t>{0, 0, 0, 0, 1, 1}));
  // A lone text cut: [SEP] of type 0 appended.
  t = bert_pair_tokens({5, 6, 7, 8}, {}, false, 4, 1, 2);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 5, 6, 2}));
  EXPECT_EQ(t.types, (std::vector<int32_t>{0, 0, 0, 0}));
}

TEST(GlueTsv, MnliTrainDevTest) {
  auto train = read_glue_tsv(GlueTask::kMnli, fixture("MNLI/train.tsv"));
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ(train->examples.size(), 12u);
  EXPECT_FALSE(train->is_test);
  EXPECT_EQ(train->examples[0].text_a, "The cat sat on the mat .");
  EXPECT_EQ(train->examples[0].text_b, "A cat is sitting .");
  EXPECT_EQ(train->examples[0].label, 1);  // entailment
  EXPECT_EQ(train->examples[1].label, 0);  // contradiction
  EXPECT_EQ(train->examples[2].label, 2);  // neutral
  EXPECT_EQ(train->examples[2].text_a, "He bought a new car.");
  EXPECT_EQ(train->examples[3].text_a, "It rained all day in Paris. The streets were wet .");
  EXPECT_EQ(train->examples[11].uid, 11);

  auto dev = read_glue_tsv(GlueTask::kMnli, fixture("MNLI/dev_mismatched.tsv"));
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_EQ(dev->examples.size(), 4u);
  EXPECT_EQ(dev->examples[0].label, 2);  // gold_label, the 16th column
  EXPECT_EQ(dev->examples[3].label, 2);

  auto test = read_glue_tsv(GlueTask::kMnli, fixture("MNLI/test_matched.tsv"), 2);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_TRUE(test->is_test);
  ASSERT_EQ(test->examples.size(), 3u);
  for (const TextPair& p : test->examples) EXPECT_EQ(p.label, 2);
}

TEST(GlueTsv, QqpSkipsMalformedTrainRows) {
  auto train = read_glue_tsv(GlueTask::kQqp, fixture("QQP/train.tsv"));
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->examples.size(), 12u);
  ASSERT_EQ(train->warnings.size(), 2u);
  EXPECT_NE(train->warnings[0].find("train.tsv:4: skipped: 7 columns"), std::string::npos)
      << train->warnings[0];
  EXPECT_NE(train->warnings[1].find("train.tsv:6: skipped: empty question1"), std::string::npos)
      << train->warnings[1];
  EXPECT_EQ(train->examples[0].text_a, "How do I learn C++ ?");
  EXPECT_EQ(train->examples[0].text_b, "What is the best way to learn C++?");
  EXPECT_EQ(train->examples[0].label, 1);
  EXPECT_EQ(train->examples[1].label, 0);

  auto test = read_glue_tsv(GlueTask::kQqp, fixture("QQP/test.tsv"));
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_TRUE(test->is_test);
  ASSERT_EQ(test->examples.size(), 4u);
  EXPECT_EQ(test->examples[1].text_a, "Why is the sky blue?");
  EXPECT_EQ(test->examples[1].label, 0);
  EXPECT_EQ(test->examples[3].uid, 3);
}

// Writes `text` into a scratch file and returns read_glue_tsv's error message.
std::string glue_error(GlueTask task, const std::string& text) {
  testing::ScratchDir dir;
  testing::write_file(dir.file("bad.tsv"), text);
  auto r = read_glue_tsv(task, dir.file("bad.tsv"));
  EXPECT_FALSE(r.ok());
  return std::string(r.status().message());
}

TEST(GlueTsv, Errors) {
  const std::string h12 = "i\tp\tq\tg\ta\tb\tc\td\ts1\ts2\tl1\tgold\n";
  EXPECT_NE(glue_error(GlueTask::kMnli, h12 + "0\tp\tq\tg\ta\tb\tc\td\tx\ty\tl\tmaybe\n")
                .find("bad.tsv:2: label \"maybe\""),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kMnli, h12 + "0\tp\tq\tg\ta\tb\tc\td\tx\ty\tl\tneutral\n0\t1\n")
                .find("bad.tsv:3: 2 tab-separated columns, expected at least 10"),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kMnli, h12 + "x1\tp\tq\tg\ta\tb\tc\td\tx\ty\tl\tneutral\n")
                .find("bad.tsv:2: id \"x1\""),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kMnli, h12 + "0\tp\tq\tg\ta\tb\tc\td\t \ty\tl\tneutral\n")
                .find("bad.tsv:2: empty sentence1"),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kQqp, "id\tq1\tq2\tx\n").find("QQP header of 4 columns"),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kQqp, "id\tq1\tq2\n0\ta\n").find("bad.tsv:2: 2 tab-separated"),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kQqp, "i\ta\tb\tq1\tq2\td\n0\t1\t2\tx\ty\t2\n")
                .find("bad.tsv:2: is_duplicate \"2\""),
            std::string::npos);
  EXPECT_NE(glue_error(GlueTask::kQqp, "i\ta\tb\tq1\tq2\td\n").find("no examples"),
            std::string::npos);
  EXPECT_EQ(read_glue_tsv(GlueTask::kQqp, fixture("QQP/missing.tsv")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(parse_glue_task("sst2").ok());
  EXPECT_FALSE(read_glue_tsv(GlueTask::kQqp, fixture("QQP/test.tsv"), 2).ok());
}

TEST(Race, DirectoryOfJsonLines) {
  auto train = read_race_dir(fixture("RACE/train/middle"));
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_EQ(train->size(), 4u);  // 1.txt: 2 questions, 2.txt: 2; notes.md is not read
  const ChoiceExample& e = (*train)[0];
  EXPECT_EQ(e.context,
            "Tom has a dog named Rex. Rex likes to run in the park every morning. Tom is ten "
            "years old.");
  EXPECT_EQ(e.label, 1);  // B
  ASSERT_EQ(e.qa.size(), 4u);
  EXPECT_EQ(e.qa[1], "Tom's dog is called Rex .");      // the "_" blank filled
  EXPECT_EQ((*train)[1].qa[2], "How old is Tom? ten");  // no blank: question + " " + option
  EXPECT_EQ((*train)[1].label, 2);
  // Every "_" takes the option (Python's str.replace).
  EXPECT_EQ((*train)[3].qa[0], "Mary reads/work many books at reads/work .");
  EXPECT_EQ((*train)[2].label, 0);
}

std::string race_error(const std::string& line) {
  testing::ScratchDir dir;
  testing::write_file(dir.file("a.txt"), line + "\n");
  auto r = read_race_dir(dir.path());
  EXPECT_FALSE(r.ok());
  return std::string(r.status().message());
}

TEST(Race, Errors) {
  EXPECT_NE(
      race_error(
          R"({"article": "a", "questions": ["q"], "options": [["1","2","3","4"]], "answers": ["E"]})")
          .find("a.txt:1: question 0: answer \"E\""),
      std::string::npos);
  EXPECT_NE(
      race_error(
          R"({"article": "a", "questions": ["q"], "options": [["1","2","3"]], "answers": ["A"]})")
          .find("question 0: 3 options, expected 4"),
      std::string::npos);
  EXPECT_NE(
      race_error(
          R"({"article": "a", "questions": ["q", "r"], "options": [["1","2","3","4"]], "answers": ["A"]})")
          .find("2 questions, 1 options lists and 1 answers"),
      std::string::npos);
  EXPECT_NE(race_error(R"({"questions": []})").find("no field \"article\""), std::string::npos);
  EXPECT_NE(race_error("{not json").find("a.txt:1: not valid JSON"), std::string::npos);
  EXPECT_EQ(read_race_dir(fixture("RACE/none")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(race_error(R"({"article": "a", "questions": [], "options": [], "answers": []})")
                .find("no RACE questions"),
            std::string::npos);
}

std::vector<int32_t> bytes(const std::string& s) {
  return std::vector<int32_t>(s.begin(), s.end());
}

TEST(TaskData, TokenSequencesPerFormat) {
  const ByteTokenizer tok;
  const int32_t sep = ByteTokenizer::kEod;
  auto mnli = load_task_data("mnli", fixture("MNLI/dev_matched.tsv"), tok, 64, 128, {false, sep});
  ASSERT_TRUE(mnli.ok()) << mnli.status();
  ASSERT_EQ(mnli->examples.size(), 4u);
  // "The cat sat on the mat ." [sep] "A cat is sitting ." [sep]: 24 + 1 + 18 + 1 tokens < 64.
  std::vector<int32_t> want = bytes("The cat sat on the mat .");
  want.push_back(sep);
  const std::vector<int32_t> b = bytes("A cat is sitting .");
  want.insert(want.end(), b.begin(), b.end());
  want.push_back(sep);
  EXPECT_EQ(mnli->examples[0].tokens, want);
  EXPECT_EQ(mnli->examples[0].label, 1);
  // Longer than seq_len 20: the first 19 tokens, then sep.
  auto cut = load_task_data("mnli", fixture("MNLI/dev_matched.tsv"), tok, 20, 128, {false, sep});
  ASSERT_TRUE(cut.ok());
  std::vector<int32_t> head(want.begin(), want.begin() + 19);
  head.push_back(sep);
  EXPECT_EQ(cut->examples[0].tokens, head);

  auto qqp = load_task_data("qqp", fixture("QQP/train.tsv"), tok, 64, 128, {false, sep});
  ASSERT_TRUE(qqp.ok()) << qqp.status();
  EXPECT_EQ(qqp->examples.size(), 12u);
  EXPECT_EQ(qqp->warnings.size(), 2u);

  // RACE: qa cut to max_qa_length 5, then sep, the article, cut at seq_len 16 - 1, sep.
  auto race = load_task_data("race", fixture("RACE/train/middle"), tok, 16, 5, {false, sep});
  ASSERT_TRUE(race.ok()) << race.status();
  ASSERT_EQ(race->examples.size(), 4u);
  ASSERT_EQ(race->examples[0].choices.size(), 4u);
  std::vector<int32_t> c1 = bytes("Tom's");  // "Tom's dog is called Rex ." cut to 5
  c1.push_back(sep);
  const std::vector<int32_t> art = bytes("Tom has a");  // 15 - 6 = 9 article tokens
  c1.insert(c1.end(), art.begin(), art.end());
  c1.push_back(sep);
  EXPECT_EQ(race->examples[0].choices[1], c1);
  EXPECT_EQ(race->examples[0].label, 1);

  // BERT layout: [CLS]=300 a [SEP]=301 b [SEP], with the token types.
  auto bert =
      load_task_data("mnli", fixture("MNLI/dev_matched.tsv"), tok, 64, 128, {true, 301, 300});
  ASSERT_TRUE(bert.ok()) << bert.status();
  std::vector<int32_t> ids = {300};
  const std::vector<int32_t> a = bytes("The cat sat on the mat .");
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(301);
  ids.insert(ids.end(), b.begin(), b.end());
  ids.push_back(301);
  EXPECT_EQ(bert->examples[0].tokens, ids);
  std::vector<int32_t> types(a.size() + 2, 0);
  types.resize(ids.size(), 1);
  EXPECT_EQ(bert->examples[0].types, types);

  auto jsonl = load_task_data("json", fixture("RACE/train/middle"), tok, 16, 5, {false, sep});
  EXPECT_EQ(jsonl.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anvil::io
