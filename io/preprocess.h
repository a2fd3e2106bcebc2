// Corpus -> indexed dataset, the library half of bin/preprocess (Megatron's
// tools/preprocess_data.py without sentence splitting):
//   - plain text: one document per paragraph; paragraphs are separated by blank (whitespace-
//     only) lines, the lines of a paragraph are joined with '\n' (a trailing '\r' is dropped);
//   - JSONL: one JSON object per line, one document per line and per --json-keys key (a line
//     holding only whitespace is ignored).
// Each key's documents go to {output_prefix}_{key}_document.{bin,idx}; empty documents are
// skipped, --append-eod adds the tokenizer's EOD to each document, as Megatron does.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::io {

enum class CorpusFormat { kAuto, kText, kJsonl };  // kAuto: .json/.jsonl -> kJsonl, else kText

struct PreprocessOptions {
  std::string input;  // a file, or "-" for stdin
  std::string output_prefix;
  std::vector<std::string> json_keys = {"text"};
  CorpusFormat format = CorpusFormat::kAuto;
  std::string tokenizer_type = "Byte";  // the only one until the GPT-2 BPE lands
  bool append_eod = false;
  bool skip_bad_lines = false;  // JSONL: count and skip malformed lines instead of failing
};

struct PreprocessOutput {
  std::string prefix;  // {output_prefix}_{key}_document
  int64_t documents = 0;
  int64_t tokens = 0;
  uint64_t bytes = 0;  // size of the .bin
};

struct PreprocessStats {
  uint64_t input_bytes = 0;
  int64_t input_documents = 0;  // paragraphs or JSONL records read
  int64_t skipped_lines = 0;    // malformed JSONL lines skipped under skip_bad_lines
  std::vector<PreprocessOutput> outputs;
};

// Called after every document with the input bytes consumed and documents read so far.
using PreprocessProgress = std::function<void(uint64_t bytes, uint64_t documents)>;

// Errors: NotFound for a missing input, InvalidArgument for bad options or (without
// skip_bad_lines) a malformed JSONL line, naming "input:line:column".
absl::StatusOr<PreprocessStats> preprocess_corpus(const PreprocessOptions& options,
                                                  const PreprocessProgress& progress);

// Parses `line` as one JSON object (RFC 8259, plus Python's NaN/Infinity literals) and stores
// the decoded string value of each top-level key in `keys` into (*values)[i] (the last one
// wins for duplicate keys, as in Python). \uXXXX escapes become UTF-8, surrogate pairs are
// combined and a lone surrogate becomes U+FFFD. Errors (InvalidArgument) name the 1-based
// column: malformed JSON, a key that is missing or whose value is not a string.
absl::Status extract_json_strings(std::string_view line, const std::vector<std::string>& keys,
                                  std::vector<std::string>* values);

}  // namespace anvil::io
