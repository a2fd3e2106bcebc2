// The fixture of scripts/make_bert_t5_fixture.py (tests/io/fixtures/bert_t5): a sentence-split
// dataset, its WordPiece vocab.txt, and the mappings and samples a transcription of Megatron's
// code made of them (numpy RandomState for the per-sample draws), listed in cases.txt (one case
// per line, first word = kind).
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/indexed_dataset.h"
#include "io/masked_lm.h"
#include "io/npy.h"
#include "io/preprocess.h"
#include "io/tokenizer.h"
#include "tests/io/io_test_util.h"

namespace anvil::io::testing {

inline std::string bert_t5_dir() { return fixture_dir() + "/bert_t5"; }
inline std::string bert_t5_prefix() { return bert_t5_dir() + "/synth"; }
inline std::string bert_t5_expected(const std::string& file) {
  return bert_t5_dir() + "/expected/" + file + ".npy";
}

// The lines of cases.txt whose first word is `kind`, split into words.
inline std::vector<std::vector<std::string>> bert_t5_cases(const std::string& kind) {
  std::istringstream in(read_file(bert_t5_dir() + "/cases.txt"));
  std::vector<std::vector<std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> words;
    std::string w;
    while (ls >> w) words.push_back(w);
    if (!words.empty() && words[0] == kind) out.push_back(words);
  }
  EXPECT_FALSE(out.empty()) << "no '" << kind << "' cases in the fixture";
  return out;
}

// The case line of kind `kind` named `name`.
inline std::vector<std::string> bert_t5_case(const std::string& kind, const std::string& name) {
  for (auto& c : bert_t5_cases(kind)) {
    if (c[1] == name) return c;
  }
  ADD_FAILURE() << "no case " << kind << " " << name;
  return {};
}

inline NpyArray bert_t5_array(const std::string& file) {
  auto a = NpyArray::open(bert_t5_expected(file));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : NpyArray();
}

inline std::shared_ptr<const IndexedDataset> bert_t5_data() {
  auto d = IndexedDataset::open(bert_t5_prefix());
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::shared_ptr<const IndexedDataset>(std::move(*d)) : nullptr;
}

// Megatron's BertWordPieceLowerCase over the fixture's vocab.txt, with `extra_ids` sentinels.
inline MlmVocab bert_t5_vocab(int extra_ids) {
  TokenizerOptions o;
  o.type = "BertWordPieceLowerCase";
  o.vocab_file = bert_t5_dir() + "/vocab.txt";
  o.vocab_extra_ids = extra_ids;
  auto tok = make_tokenizer(o);
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (!tok.ok()) return {};
  auto v = make_mlm_vocab(**tok);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : MlmVocab();
}

// Row `row` of a [rows, n] expected array equals got[0..n).
inline ::testing::AssertionResult row_equals(const NpyArray& want, int64_t row,
                                             const std::vector<int32_t>& got) {
  const int64_t n = want.shape().size() == 2 ? want.shape()[1] : -1;
  if (n != static_cast<int64_t>(got.size())) {
    return ::testing::AssertionFailure() << "row length " << got.size() << ", expected " << n;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (got[i] != want[row * n + i]) {
      return ::testing::AssertionFailure()
             << "position " << i << ": " << got[i] << ", expected " << want[row * n + i];
    }
  }
  return ::testing::AssertionSuccess();
}

// A corpus of sentence-split English paragraphs run through bin/preprocess's library with
// --split-sentences and the bundled BERT vocabulary (data/bert/vocab.txt, uncased, with
// `extra_ids` sentinels), as a user would make BERT/T5 data. Returns the dataset prefix.
inline std::string preprocess_english(const ScratchDir& dir, int extra_ids, MlmVocab* vocab) {
  static const char* kSentences[] = {"The unbelievably patient tokenizer splits words into pieces.",
                                     "Megatron builds samples from whole sentences.",
                                     "A quick brown fox jumps over the lazy dog.",
                                     "Preprocessing writes one item per sentence.",
                                     "Whole word masking hides every piece of a word.",
                                     "Sentinels replace the corrupted spans in the encoder.",
                                     "Nobody expected the extraordinarily long documentation.",
                                     "Short sentence.",
                                     "The decoder predicts the spans after each sentinel token.",
                                     "Anvil reproduces the reference implementation exactly."};
  std::string corpus;
  uint32_t state = 12345;
  for (int doc = 0; doc < 80; ++doc) {
    const int n = 1 + doc % 7;
    for (int s = 0; s < n; ++s) {
      state = state * 1103515245u + 12345u;
      corpus += kSentences[(state >> 16) % 10];
      corpus += ' ';
    }
    corpus += "\n\n";
  }
  write_file(dir.file("corpus.txt"), corpus);
  TokenizerOptions t;
  t.type = "BertWordPieceLowerCase";
  t.vocab_file = fixture_dir() + "/../../../data/bert/vocab.txt";
  t.vocab_extra_ids = extra_ids;
  auto tok = make_tokenizer(t);
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (!tok.ok()) return "";
  auto v = make_mlm_vocab(**tok);
  EXPECT_TRUE(v.ok()) << v.status();
  if (v.ok()) *vocab = *v;
  PreprocessOptions p;
  p.input = dir.file("corpus.txt");
  p.output_prefix = dir.file("en");
  p.split_sentences = true;
  auto stats = preprocess_corpus(p, **tok);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? stats->outputs[0].prefix : "";
}

}  // namespace anvil::io::testing
