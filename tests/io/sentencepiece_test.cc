// SentencePiece (io/tokenizers/sentencepiece.h) against the spm column of the parity fixture
// (expected_ids.jsonl, produced by Python's sentencepiece on data/t5/spm.model, see
// scripts/gpu/make_tokenizer_fixtures.py), plus specials, T5 sentinels (Hugging Face's
// convention), decode round trips, errors naming the file, and concurrent encodes.
#include "io/tokenizers/sentencepiece.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tokenizers/factories.h"
#include "tests/io/io_test_util.h"
#include "tests/io/tokenizer_fixture_cases.h"

namespace anvil::io {
namespace {

using testing::describe_case;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::load_tokenizer_cases;
using testing::repo_path;

const char kModel[] = "data/t5/spm.model";

std::unique_ptr<SentencePieceTokenizer> load_spm(int extra_ids = 0) {
  auto tok = SentencePieceTokenizer::load(repo_path(kModel), extra_ids);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SentencePieceTest, MatchesFixture) {
  auto tok = load_spm();
  ASSERT_NE(tok, nullptr);
  const auto cases = load_tokenizer_cases();
  ASSERT_GE(cases.size(), 100u);
  for (const auto& c : cases) {
    ASSERT_TRUE(c.ids.count("spm")) << describe_case(c);
    EXPECT_EQ(tok->encode(c.bytes), c.ids.at("spm")) << describe_case(c);
  }
}

TEST(SentencePieceTest, FactoryAndSentinelsLeaveFixtureIdsUnchanged) {
  TokenizerOptions o;
  o.type = "SentencePiece";
  o.vocab_file = repo_path(kModel);
  o.vocab_extra_ids = 100;
  auto tok = make_sentencepiece_tokenizer(o);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->name(), "SentencePiece");
  for (const auto& c : load_tokenizer_cases()) {
    EXPECT_EQ((*tok)->encode(c.bytes), c.ids.at("spm")) << describe_case(c);
  }
}

TEST(SentencePieceTest, SpecialTokensFromModel) {
  auto tok = load_spm();
  ASSERT_NE(tok, nullptr);
  const SpecialTokens& s = tok->special();
  EXPECT_EQ(s.pad, 0);
  EXPECT_EQ(s.eos, 1);
  EXPECT_EQ(s.unk, 2);
  EXPECT_EQ(s.bos, -1);  // disabled in this model
  EXPECT_EQ(s.eod, 1);   // = eos
  EXPECT_EQ(s.cls, -1);
  EXPECT_TRUE(s.sentinels.empty());
  EXPECT_EQ(tok->vocab_size(), 8000);
  EXPECT_EQ(tok->piece(1), "</s>");
}

TEST(SentencePieceTest, T5SentinelsCountDownFromTheEnd) {
  auto tok = load_spm(3);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 8003);
  // Hugging Face T5: <extra_id_0> is the last id.
  EXPECT_THAT(tok->special().sentinels, ElementsAre(8002, 8001, 8000));
  EXPECT_EQ(tok->piece(8002), "<extra_id_0>");
  EXPECT_EQ(tok->piece(8000), "<extra_id_2>");

  const std::vector<int32_t> a = tok->encode("the cat");
  const std::vector<int32_t> b = tok->encode("sat down");
  std::vector<int32_t> expected = a;
  expected.push_back(8002);
  expected.insert(expected.end(), b.begin(), b.end());
  expected.push_back(8000);
  EXPECT_EQ(tok->encode("the cat<extra_id_0>sat down<extra_id_2>"), expected);
  // Out-of-range or malformed sentinel text is ordinary text.
  const std::vector<int32_t> plain = tok->encode("x<extra_id_3> <extra_id_01> <extra_id_>");
  for (const int32_t id : plain) EXPECT_LT(id, 8000);

  auto text = tok->decode(expected);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "the cat<extra_id_0>sat down<extra_id_2>");
}

TEST(SentencePieceTest, DecodeRoundTrips) {
  auto tok = load_spm();
  ASSERT_NE(tok, nullptr);
  for (const std::string s : {"In the beginning God created the heaven and the earth.",
                              "And the earth was without form, and void."}) {
    auto text = tok->decode(tok->encode(s));
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, s);
  }
  // Every fixture line: decoding the reference ids succeeds, and re-encoding the decoded text
  // reproduces them wherever the model saw no unknown piece (the normalizer is idempotent).
  int round_trips = 0;
  for (const auto& c : load_tokenizer_cases()) {
    const auto& ids = c.ids.at("spm");
    auto text = tok->decode(ids);
    ASSERT_TRUE(text.ok()) << describe_case(c) << ": " << text.status();
    if (std::find(ids.begin(), ids.end(), tok->special().unk) != ids.end()) continue;
    EXPECT_EQ(tok->encode(*text), ids) << describe_case(c);
    ++round_trips;
  }
  EXPECT_GE(round_trips, 30);  // 34 of the 113 lines have no unknown piece
  auto bad = tok->decode({5, 8000});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("8000"));
}

TEST(SentencePieceTest, MissingAndCorruptModel) {
  testing::ScratchDir dir;
  auto missing = SentencePieceTokenizer::load(dir.file("none.model"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("none.model"));

  testing::write_file(dir.file("bad.model"), "this is not a protobuf \xff\xfe\x01");
  auto corrupt = SentencePieceTokenizer::load(dir.file("bad.model"));
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(corrupt.status().message()), HasSubstr("bad.model"));

  // A truncated copy of the real model.
  const std::string model = testing::read_file(repo_path(kModel));
  testing::write_file(dir.file("cut.model"), model.substr(0, model.size() / 2));
  auto cut = SentencePieceTokenizer::load(dir.file("cut.model"));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("cut.model"));
}

TEST(SentencePieceTest, ConcurrentEncodeIsConsistent) {
  auto tok = load_spm(2);
  ASSERT_NE(tok, nullptr);
  const auto cases = load_tokenizer_cases();
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep) {
        for (size_t i = 0; i < cases.size(); ++i) {
          const auto& c = cases[(i + t * 17) % cases.size()];
          if (tok->encode(c.bytes) != c.ids.at("spm")) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace anvil::io
