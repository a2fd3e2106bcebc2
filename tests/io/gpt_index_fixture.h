// The fixture of scripts/make_gpt_index_fixture.py (tests/io/fixtures/gpt_index): expected
// Megatron index arrays computed by a numpy re-implementation of Megatron's code, and cases.txt
// listing the cases (one per line, first word = kind).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/npy.h"
#include "tests/io/io_test_util.h"

namespace anvil::io::testing {

inline std::string gpt_fixture_dir() { return fixture_dir() + "/gpt_index"; }
inline std::string gpt_expected(const std::string& file) {
  return gpt_fixture_dir() + "/expected/" + file;
}

// The lines of cases.txt whose first word is `kind`, split into words.
inline std::vector<std::vector<std::string>> gpt_cases(const std::string& kind) {
  std::istringstream in(read_file(gpt_fixture_dir() + "/cases.txt"));
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

inline NpyArray load_expected(const std::string& file) {
  auto a = NpyArray::open(gpt_expected(file));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : NpyArray();
}

// Element-wise equality of two arrays (values and shapes; dtypes may differ).
inline ::testing::AssertionResult same_values(const NpyArray& got, const NpyArray& want) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: " << got.size() << " vs " << want.size() << " elements";
  }
  for (int64_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs expected " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace anvil::io::testing
