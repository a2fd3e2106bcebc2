// The tokenizer parity fixture, tests/io/fixtures/tokenizers/expected_ids.jsonl: one JSON object
// per line, {"hex": input bytes, "<column>": [expected ids], ...}. The expected ids were produced
// once on the GPU machine by scripts/gpu/make_tokenizer_fixtures.py from the reference
// implementations (tiktoken, Hugging Face tokenizers, a plain-Python BERT tokenizer and the
// sentencepiece library; two independent references had to agree for every line), with no
// special tokens added and invalid UTF-8 decoded as Python's errors="replace".
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/io/io_test_util.h"

namespace anvil::io::testing {

struct TokenizerCase {
  int line = 0;       // 1-based line in expected_ids.jsonl
  std::string bytes;  // the input text (raw bytes, possibly ill-formed UTF-8)
  std::map<std::string, std::vector<int32_t>> ids;  // column -> expected ids
};

// The repository root, from this header's location (CMake passes absolute paths), else the
// working directory (CTest runs tests from the root).
inline std::string repo_path(const std::string& relative) {
  const std::string here = __FILE__;
  const size_t pos = here.rfind("/tests/io/");
  if (pos != std::string::npos) {
    const std::string p = here.substr(0, pos) + "/" + relative;
    if (file_exists(p)) return p;
  }
  return relative;
}

inline std::string tokenizer_fixture(const std::string& name) {
  return fixture_dir() + "/tokenizers/" + name;
}

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

inline std::vector<TokenizerCase> load_tokenizer_cases() {
  std::ifstream f(tokenizer_fixture("expected_ids.jsonl"));
  EXPECT_TRUE(f.good()) << "missing fixture " << tokenizer_fixture("expected_ids.jsonl");
  std::vector<TokenizerCase> cases;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(j.is_object()) << "expected_ids.jsonl:" << n << " is not a JSON object";
    if (!j.is_object()) continue;
    TokenizerCase c;
    c.line = n;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "hex") {
        c.bytes = from_hex(it.value().get<std::string>());
      } else if (it.value().is_array()) {
        c.ids[it.key()] = it.value().get<std::vector<int32_t>>();
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// Printable description of a case for failure messages.
inline std::string describe_case(const TokenizerCase& c) {
  std::ostringstream s;
  s << "expected_ids.jsonl:" << c.line << " text \"";
  for (const char ch : c.bytes) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (u >= 0x20 && u != 0x7F && u != '\\') {
      s << ch;
    } else {
      static const char* kHex = "0123456789abcdef";
      s << "\\x" << kHex[u >> 4] << kHex[u & 15];
    }
  }
  s << "\"";
  return s.str();
}

}  // namespace anvil::io::testing
