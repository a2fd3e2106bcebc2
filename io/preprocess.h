// Corpus -> indexed dataset, the library half of bin/preprocess (Megatron's
// tools/preprocess_data.py) and of `preprocess --merge` (tools/merge_preprocessed_data.py).
//
// Input:
//   - JSONL: one JSON object per line, one document per line and per json key; a line holding
//     only whitespace is counted as blank and ignored (Python's json.loads would fail on it);
//   - plain text: one document per paragraph; paragraphs are separated by blank (whitespace-
//     only) lines, the lines of a paragraph are joined with '\n' (a trailing '\r' is dropped).
// Output, per key: {output_prefix}_{key}_document.{bin,idx}, or ..._{key}_sentence.{bin,idx}
// with split_sentences, byte-identical to Megatron's: token dtype uint16 when the vocabulary
// has < 65500 ids, else int32; one sequence per document (per sentence with split_sentences;
// sentences without tokens are dropped); append_eod adds the tokenizer's EOD to the last
// sequence of each document; documents without tokens are skipped.
//
// Pipeline: a reader thread cuts the input into chunks of whole lines (whole paragraphs for
// plain text), `workers` threads parse, split and tokenize chunks, and the calling thread
// appends the results to the writers strictly in input order, so the output does not depend
// on the number of workers. At most about 2 * workers + 2 chunks are in flight: memory is
// constant in the corpus size.
//
// Bad input, each reported as "input:line: problem" (the first max_reported of each kind
// individually through `warning`, all of them counted in the stats), so every input line is
// accounted for: lines == records + blank_lines + bad_lines.
//   - malformed JSON, a missing key, a non-string value: an error (InvalidArgument naming
//     input:line:column) or, with skip_bad_lines, a skipped and counted line;
//   - invalid UTF-8 in a text, or a lone surrogate \uXXXX escape in JSON: tokenized anyway (the
//     tokenizers replace invalid bytes like Python's errors='replace', the escape becomes
//     U+FFFD) and counted as a warning;
//   - a document without tokens: skipped (as Megatron does) and counted as a warning.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/indexed_dataset.h"
#include "io/tokenizer.h"

namespace anvil::io {

// kAuto: .json/.jsonl files and stdin ("-") are JSONL (Megatron's input), other files text.
enum class CorpusFormat { kAuto, kText, kJsonl };

// Bounds of PreprocessOptions::workers and ::chunk_bytes: a thread per worker, and about
// 2 * workers + 2 chunks in memory.
inline constexpr int kMaxPreprocessWorkers = 1024;
inline constexpr size_t kMaxChunkBytes = size_t{1} << 30;

struct PreprocessOptions {
  std::string input;  // a file, or "-" for stdin
  std::string output_prefix;
  std::vector<std::string> json_keys = {"text"};
  CorpusFormat format = CorpusFormat::kAuto;
  bool append_eod = false;
  bool split_sentences = false;    // io/sentence_splitter.h; outputs are named *_sentence
  bool keep_newlines = false;      // with split_sentences: whitespace after a sentence stays in it
  bool skip_bad_lines = false;     // skip (and count) malformed lines instead of failing
  int workers = 1;                 // tokenizing threads, [1, kMaxPreprocessWorkers]
  size_t chunk_bytes = 256 << 10;  // input bytes per unit of work, <= kMaxChunkBytes (whole
                                   // lines; tests: tiny)
  int max_reported = 10;           // problems of each kind reported individually
};

struct PreprocessOutput {
  std::string prefix;  // {output_prefix}_{key}_{document|sentence}
  TokenDType dtype = TokenDType::kU16;
  int64_t documents = 0;
  int64_t sequences = 0;  // = documents, or sentences with split_sentences
  int64_t tokens = 0;
  int64_t empty_documents = 0;  // texts without tokens, skipped
  uint64_t bytes = 0;           // size of the .bin
};

struct PreprocessStats {
  uint64_t input_bytes = 0;
  int64_t lines = 0;         // input lines read
  int64_t records = 0;       // JSONL objects or text paragraphs processed
  int64_t blank_lines = 0;   // whitespace-only lines (paragraph separators in text)
  int64_t bad_lines = 0;     // malformed lines skipped under skip_bad_lines
  int64_t invalid_utf8 = 0;  // texts (record x key) holding invalid UTF-8, tokenized anyway
  double seconds = 0;
  std::vector<PreprocessOutput> outputs;  // one per json key
};

struct PreprocessCallbacks {
  // After each chunk is written: input bytes consumed and records done so far. Called on the
  // calling thread, never concurrently.
  std::function<void(uint64_t bytes, uint64_t records)> progress;
  // "input:line: problem" for the first max_reported problems of each kind (then one line
  // saying further ones are only counted). Calling thread, in input order.
  std::function<void(const std::string& message)> warning;
  // Polled by the reader thread and the calling thread (at least every 100 ms): once it returns
  // true, preprocessing stops and returns Cancelled, leaving no output and no temporary. For
  // SIGINT/SIGTERM handlers that only set a flag.
  std::function<bool()> cancelled;
};

// Temporaries that dead processes left for the outputs (io/temp_files.h) are removed first and
// reported through `warning`.
// Errors: NotFound for a missing input, InvalidArgument for bad options or an input that is
// also an output file (same inode), ResourceExhausted when the worker threads cannot be
// started, or (without skip_bad_lines) the first malformed line in input order,
// "input:line: column C: problem". On error no output file and no temporary is left behind.
absl::StatusOr<PreprocessStats> preprocess_corpus(const PreprocessOptions& options,
                                                  const Tokenizer& tokenizer,
                                                  const PreprocessCallbacks& callbacks = {});

// Megatron's dataset name for a key: {prefix}_{key}_document or {prefix}_{key}_sentence.
std::string preprocess_output_prefix(const std::string& output_prefix, const std::string& key,
                                     bool split_sentences);

struct MergeStats {
  TokenDType dtype = TokenDType::kU16;
  int64_t documents = 0;
  int64_t sequences = 0;
  uint64_t bytes = 0;                            // size of the merged .bin
  std::vector<std::string> removed_temporaries;  // stale ones of the outputs (temp_files.h)
};

// Concatenates the datasets `inputs` (prefixes) into output_prefix.{bin,idx}, as Megatron's
// merge_preprocessed_data.py (MMapIndexedDatasetBuilder.merge_file_) does: sizes appended,
// doc_idx offset and appended, pointers recomputed, the .bin files copied in 4 MiB blocks.
// All inputs must have the same dtype (InvalidArgument naming both otherwise) and contiguous
// .bin layouts, and none may be the output (same inode). Outputs appear atomically (temporary
// names, then rename). `cancelled` (polled per 4 MiB block) stops the merge with Cancelled and
// no output, as in PreprocessCallbacks.
absl::StatusOr<MergeStats> merge_datasets(const std::vector<std::string>& inputs,
                                          const std::string& output_prefix,
                                          const std::function<bool()>& cancelled = {});

// Byte offset of the first invalid UTF-8 sequence in `text` (Python's strict decoder: no
// overlong forms, no surrogates, nothing above U+10FFFF), or npos when it is valid.
size_t find_invalid_utf8(std::string_view text);

}  // namespace anvil::io
