// Corpus -> indexed dataset (see io/preprocess.h): a reader thread cuts the input into chunks
// of whole lines, worker threads parse/split/tokenize them, and the calling thread writes the
// results in input order. merge_datasets lives in io/merge_datasets.cc.
#include "io/preprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/log.h"
#include "engine/status.h"
#include "io/file_checks.h"
#include "io/json_strings.h"
#include "io/sentence_splitter.h"
#include "io/temp_files.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io {
namespace {

// ------------------------------------------------------------------------------------------
// Pipeline pieces
// ------------------------------------------------------------------------------------------

bool is_blank(std::string_view line) {
  for (const char c : line) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A unit of work: whole lines of the input (whole paragraphs for plain text).
struct Chunk {
  int64_t index = 0;       // position in the input, 0, 1, 2, ...
  int64_t first_line = 1;  // 1-based line number of data's first line
  std::string data;
};

// One key's share of a chunk: tokens of all its sequences back to back.
struct KeyOutput {
  std::vector<int32_t> tokens;
  std::vector<int32_t> sequence_sizes;
  std::vector<int32_t> document_sequences;  // sequences per (non-empty) document
  int64_t empty_documents = 0;
};

enum ProblemKind { kBadLine = 0, kInvalidUtf8 = 1, kEmptyDocument = 2, kNumProblemKinds = 3 };
constexpr const char* kProblemNames[kNumProblemKinds] = {
    "skipped malformed lines", "texts with invalid UTF-8", "empty documents"};

struct ChunkResult {
  uint64_t bytes = 0;
  int64_t lines = 0, records = 0, blank_lines = 0, bad_lines = 0, invalid_utf8 = 0;
  std::vector<KeyOutput> keys;
  // Problems in line order, at most max_reported + 1 of each kind (one more than the writer
  // reports, so it knows when to say that further ones are only counted).
  std::vector<std::pair<ProblemKind, std::string>> problems;
  int problem_counts[kNumProblemKinds] = {0, 0, 0};
  absl::Status error;  // without skip_bad_lines: the first malformed line; the chunk ends there
};

// Parses, splits and tokenizes chunks; one per worker thread (owns its scratch buffers).
class ChunkProcessor {
 public:
  ChunkProcessor(const PreprocessOptions& options, CorpusFormat format, const Tokenizer& tokenizer)
      : opt_(options),
        format_(format),
        tokenizer_(tokenizer),
        splitter_(options.keep_newlines),
        eod_(tokenizer.special().eod),
        input_name_(options.input == "-" ? "<stdin>" : options.input) {}

  void process(const Chunk& chunk, ChunkResult* r) {
    r->bytes = chunk.data.size();
    r->keys.assign(opt_.json_keys.size(), KeyOutput());
    std::string_view data = chunk.data;
    int64_t line_no = chunk.first_line;
    std::string paragraph;  // plain text: the open paragraph's lines joined with '\n'
    int64_t paragraph_line = 0;
    size_t pos = 0;
    while (pos < data.size()) {
      const size_t nl = data.find('\n', pos);
      const size_t end = nl == std::string_view::npos ? data.size() : nl;
      std::string_view line = data.substr(pos, end - pos);
      pos = nl == std::string_view::npos ? data.size() : nl + 1;
      ++r->lines;
      if (format_ == CorpusFormat::kJsonl) {
        process_json_line(line, line_no, r);
        if (!r->error.ok()) return;
      } else {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (is_blank(line)) {
          ++r->blank_lines;
          if (paragraph_line > 0) process_record(paragraph_line, &paragraph, r);
          paragraph_line = 0;
        } else {
          if (paragraph_line == 0) {
            paragraph.clear();
            paragraph_line = line_no;
          } else {
            paragraph.push_back('\n');
          }
          paragraph.append(line.data(), line.size());
        }
      }
      ++line_no;
    }
    // The reader cuts plain text after blank lines, so only the input's end leaves one open.
    if (paragraph_line > 0) process_record(paragraph_line, &paragraph, r);
  }

 private:
  void report(ChunkResult* r, ProblemKind kind, int64_t line_no, const std::string& what) {
    if (r->problem_counts[kind] <= opt_.max_reported) {
      ++r->problem_counts[kind];
      r->problems.emplace_back(kind, absl::StrCat(input_name_, ":", line_no, ": ", what));
    }
  }

  void process_json_line(std::string_view line, int64_t line_no, ChunkResult* r) {
    if (is_blank(line)) {
      ++r->blank_lines;
      return;
    }
    const absl::Status parsed = extract_json_strings(line, opt_.json_keys, &values_, &lone_);
    if (!parsed.ok()) {
      if (!opt_.skip_bad_lines) {
        r->error = absl::InvalidArgumentError(
            absl::StrCat(input_name_, ":", line_no, ": ", parsed.message()));
        return;
      }
      ++r->bad_lines;
      report(r, kBadLine, line_no, absl::StrCat("skipped: ", parsed.message()));
      return;
    }
    for (size_t k = 0; k < values_.size(); ++k) add_document(k, line_no, values_[k], lone_[k], r);
    ++r->records;
  }

  void process_record(int64_t line_no, std::string* text, ChunkResult* r) {
    add_document(0, line_no, *text, 0, r);
    ++r->records;
  }

  // Tokenizes one document of key k into r->keys[k], Megatron's Encoder.encode.
  // lone_column: where a JSON \uXXXX escape held a lone surrogate (decoded as U+FFFD), or 0.
  void add_document(size_t k, int64_t line_no, std::string_view text, size_t lone_column,
                    ChunkResult* r) {
    const size_t bad = find_invalid_utf8(text);
    if (bad != std::string_view::npos) {
      ++r->invalid_utf8;
      report(r, kInvalidUtf8, line_no,
             absl::StrFormat("invalid UTF-8 in \"%s\" at byte %d (tokenized with U+FFFD)",
                             opt_.json_keys[k], bad));
    } else if (lone_column > 0) {
      ++r->invalid_utf8;
      report(r, kInvalidUtf8, line_no,
             absl::StrFormat("invalid UTF-8 in \"%s\": a lone surrogate escape at column %d "
                             "(tokenized with U+FFFD)",
                             opt_.json_keys[k], lone_column));
    }
    KeyOutput& out = r->keys[k];
    const size_t first_sequence = out.sequence_sizes.size();
    auto add_sequence = [&](std::string_view s) {
      const size_t before = out.tokens.size();
      tokenizer_.encode(absl::string_view(s.data(), s.size()), &out.tokens);
      // Sentences without tokens are dropped (Megatron: `if len(sentence_ids) > 0`).
      if (out.tokens.size() > before) {
        out.sequence_sizes.push_back(static_cast<int32_t>(out.tokens.size() - before));
      }
    };
    if (opt_.split_sentences) {
      sentences_.clear();
      splitter_.split(text, &sentences_);
      for (const std::string_view s : sentences_) add_sequence(s);
    } else {
      add_sequence(text);
    }
    const size_t n = out.sequence_sizes.size() - first_sequence;
    if (n == 0) {
      ++out.empty_documents;
      report(r, kEmptyDocument, line_no,
             absl::StrFormat("empty document (\"%s\" has no tokens), skipped", opt_.json_keys[k]));
      return;
    }
    if (opt_.append_eod) {
      out.tokens.push_back(eod_);
      ++out.sequence_sizes.back();
    }
    out.document_sequences.push_back(static_cast<int32_t>(n));
  }

  const PreprocessOptions& opt_;
  const CorpusFormat format_;
  const Tokenizer& tokenizer_;
  const SentenceSplitter splitter_;
  const int32_t eod_;
  const std::string input_name_;  // in messages
  std::vector<std::string> values_;
  std::vector<size_t> lone_;  // per key: column of a lone surrogate escape, or 0
  std::vector<std::string_view> sentences_;
};

// Reads the input in blocks and cuts it into chunks ending at a line (JSONL) or paragraph
// (text: after a blank line) boundary.
class ChunkReader {
 public:
  // `stop`: polled while waiting for input (from the reader thread); true ends the input.
  ChunkReader(CorpusFormat format, size_t chunk_bytes, std::function<bool()> stop)
      : format_(format), chunk_bytes_(std::max<size_t>(chunk_bytes, 1)), stop_(std::move(stop)) {}
  ~ChunkReader() {
    if (fd_ > 0) ::close(fd_);
  }

  absl::Status open(const std::string& path) {
    path_ = path;
    if (path == "-") {
      fd_ = 0;
      return absl::OkStatus();
    }
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      const int err = errno;
      const std::string msg = errno_message(path, "open", err);
      return err == ENOENT ? absl::NotFoundError(msg) : absl::InvalidArgumentError(msg);
    }
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    struct stat st;
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) opened_ = st;
    return absl::OkStatus();
  }

  // The next chunk; false at the end of the input or on a read error (status()).
  bool next(Chunk* chunk) {
    size_t want = chunk_bytes_;
    while (true) {
      while (!eof_ && pending_.size() < want) {
        if (!fill(want)) return false;
      }
      if (pending_.empty()) return false;  // end of input
      size_t cut = find_cut();
      if (cut == 0 && eof_) cut = pending_.size();
      if (cut == 0) {
        want = pending_.size() * 2;  // a line (paragraph) longer than the chunk: read on
        continue;
      }
      chunk->index = index_++;
      chunk->first_line = line_;
      chunk->data.assign(pending_.data(), cut);
      pending_.erase(0, cut);
      line_ += std::count(chunk->data.begin(), chunk->data.end(), '\n');
      return true;
    }
  }
  const absl::Status& status() const { return status_; }

 private:
  // Appends up to `want - pending_.size()` bytes (at least 64 KiB); sets eof_ at the end.
  bool fill(size_t want) {
    const size_t old = pending_.size();
    const size_t room = std::max<size_t>(want - std::min(want, old), 1 << 16);
    // Wait for input in steps of 100 ms, so that a stop is seen while a pipe is idle (a regular
    // file is always ready).
    while (true) {
      if (stop_()) return false;
      struct pollfd ready = {fd_, POLLIN, 0};
      if (::poll(&ready, 1, 100) != 0) break;
    }
    pending_.resize(old + room);
    ssize_t got;
    do {
      got = ::read(fd_, pending_.data() + old, room);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
      status_ = absl::DataLossError(errno_message(path_, "read", errno));
      pending_.resize(old);
      return false;
    }
    pending_.resize(old + static_cast<size_t>(got));
    read_bytes_ += static_cast<uint64_t>(got);
    if (got == 0) {
      eof_ = true;
      if (!check_unchanged()) return false;
      if (pending_.empty()) return false;
    }
    return true;
  }

  // At the end of a regular file: false (and status_) when it was truncated, appended to or
  // rewritten while it was read, since the output would then match neither version.
  bool check_unchanged() {
    struct stat now;
    if (!opened_ || ::fstat(fd_, &now) != 0) return true;
    const struct stat& then = *opened_;
    if (now.st_size == then.st_size && read_bytes_ == static_cast<uint64_t>(then.st_size) &&
        now.st_mtim.tv_sec == then.st_mtim.tv_sec && now.st_mtim.tv_nsec == then.st_mtim.tv_nsec) {
      return true;
    }
    status_ = absl::DataLossError(absl::StrFormat(
        "%s changed while it was read (%d bytes when opened, %d now, %d read): the output would "
        "match neither version; preprocess a file that is not being written",
        path_, static_cast<int64_t>(then.st_size), static_cast<int64_t>(now.st_size), read_bytes_));
    pending_.clear();
    return false;
  }

  // Length of the longest prefix of pending_ that ends at a cut point, 0 when there is none.
  size_t find_cut() const {
    size_t end = pending_.rfind('\n');
    if (end == std::string::npos) return 0;
    if (format_ == CorpusFormat::kJsonl) return end + 1;
    // Plain text: after the last blank line, so no paragraph straddles two chunks.
    while (true) {
      const size_t prev = end == 0 ? std::string::npos : pending_.rfind('\n', end - 1);
      const size_t begin = prev == std::string::npos ? 0 : prev + 1;
      if (is_blank(std::string_view(pending_).substr(begin, end - begin))) return end + 1;
      if (prev == std::string::npos) return 0;
      end = prev;
    }
  }

  const CorpusFormat format_;
  const size_t chunk_bytes_;
  const std::function<bool()> stop_;
  std::string path_;
  int fd_ = -1;
  std::optional<struct stat> opened_;  // a regular file's size and mtime when opened
  uint64_t read_bytes_ = 0;
  bool eof_ = false;
  std::string pending_;
  int64_t index_ = 0;
  int64_t line_ = 1;
  absl::Status status_;
};

// The reader thread, the worker threads and the in-order hand-off to the calling thread.
class Pipeline {
 public:
  Pipeline(const PreprocessOptions& options, CorpusFormat format, const Tokenizer& tokenizer,
           const std::function<bool()>& cancelled)
      : opt_(options),
        format_(format),
        tokenizer_(tokenizer),
        cancelled_(cancelled),
        reader_(format, options.chunk_bytes, [this] { return stopping_.load() || is_cancelled(); }),
        max_in_flight_(2 * options.workers + 2) {}

  ~Pipeline() { stop(); }

  absl::Status start() {
    ANVIL_RETURN_IF_ERROR(reader_.open(opt_.input));
    // std::thread throws when the system refuses a thread (process limit, memory for the
    // stacks): a Status, after joining the threads already started.
    try {
      threads_.emplace_back([this] { read_loop(); });
      for (int w = 0; w < opt_.workers; ++w) threads_.emplace_back([this] { work_loop(); });
    } catch (const std::system_error& e) {
      const size_t started = threads_.size();
      stop();
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot start the reader and %d worker threads (%d started): %s; use fewer --workers",
          opt_.workers, started, e.what()));
    }
    return absl::OkStatus();
  }

  // The next result in input order; false at the end (check read_status()) or once
  // cancelled() (checked every 100 ms while waiting).
  bool next(ChunkResult* result) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto ready = [&] { return done_.count(next_) > 0 || (reader_done_ && next_ >= total_); };
    while (!result_cv_.wait_for(lock, std::chrono::milliseconds(100), ready)) {
      if (is_cancelled()) return false;
    }
    auto it = done_.find(next_);
    if (it == done_.end()) return false;
    *result = std::move(it->second);
    done_.erase(it);
    ++next_;
    --in_flight_;
    space_cv_.notify_one();
    return true;
  }

  absl::Status read_status() {
    std::lock_guard<std::mutex> lock(mu_);
    return reader_.status();
  }

  // Cancels outstanding work and joins the threads (idempotent).
  void stop() {
    stopping_.store(true);
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancel_ = true;
    }
    work_cv_.notify_all();
    space_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void read_loop() {
    while (true) {
      Chunk chunk;
      const bool got = !is_cancelled() && reader_.next(&chunk);
      std::unique_lock<std::mutex> lock(mu_);
      if (!got || cancel_) {
        reader_done_ = true;
        total_ = chunk_count_;
        break;
      }
      space_cv_.wait(lock, [&] { return in_flight_ < max_in_flight_ || cancel_; });
      if (cancel_) {
        reader_done_ = true;
        total_ = chunk_count_;
        break;
      }
      ++in_flight_;
      ++chunk_count_;
      work_.push_back(std::move(chunk));
      work_cv_.notify_one();
    }
    work_cv_.notify_all();
    result_cv_.notify_all();
  }

  void work_loop() {
    ChunkProcessor processor(opt_, format_, tokenizer_);
    while (true) {
      Chunk chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return !work_.empty() || reader_done_ || cancel_; });
        if (cancel_ || work_.empty()) return;
        chunk = std::move(work_.front());
        work_.pop_front();
      }
      ChunkResult result;
      processor.process(chunk, &result);
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace(chunk.index, std::move(result));
      result_cv_.notify_all();
    }
  }

  bool is_cancelled() const { return cancelled_ && cancelled_(); }

  const PreprocessOptions& opt_;
  const CorpusFormat format_;
  const Tokenizer& tokenizer_;
  const std::function<bool()>& cancelled_;
  std::atomic<bool> stopping_{false};  // stop() was called: the reader stops waiting for input
  ChunkReader reader_;                 // used by the reader thread only (status() after it is done)
  const int64_t max_in_flight_;

  std::mutex mu_;
  std::condition_variable work_cv_, space_cv_, result_cv_;
  std::deque<Chunk> work_;
  std::map<int64_t, ChunkResult> done_;
  int64_t in_flight_ = 0;    // chunks handed to workers and not yet taken by next()
  int64_t chunk_count_ = 0;  // chunks handed out so far
  int64_t total_ = 0;        // valid once reader_done_
  int64_t next_ = 0;         // the chunk next() returns next
  bool reader_done_ = false;
  bool cancel_ = false;
  std::vector<std::thread> threads_;
};

// One output dataset per JSON key.
struct Sink {
  PreprocessOutput stats;
  std::unique_ptr<IndexedDatasetWriter> writer;
};

absl::Status write_key_output(const KeyOutput& out, size_t item, Sink* sink) {
  size_t offset = 0, q = 0;
  for (const int32_t n : out.document_sequences) {
    for (int32_t s = 0; s < n; ++s, ++q) {
      const size_t size = static_cast<size_t>(out.sequence_sizes[q]);
      ANVIL_RETURN_IF_ERROR(
          sink->writer->add_sequence(absl::MakeConstSpan(out.tokens.data() + offset, size)));
      offset += size;
    }
    ANVIL_RETURN_IF_ERROR(sink->writer->end_document());
  }
  sink->stats.documents += static_cast<int64_t>(out.document_sequences.size());
  sink->stats.sequences += static_cast<int64_t>(out.sequence_sizes.size());
  sink->stats.tokens += static_cast<int64_t>(out.tokens.size());
  sink->stats.bytes += out.tokens.size() * item;
  sink->stats.empty_documents += out.empty_documents;
  return absl::OkStatus();
}

}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // no overlong forms
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string preprocess_output_prefix(const std::string& output_prefix, const std::string& key,
                                     bool split_sentences) {
  return absl::StrCat(output_prefix, "_", key, split_sentences ? "_sentence" : "_document");
}

absl::StatusOr<PreprocessStats> preprocess_corpus(const PreprocessOptions& options,
                                                  const Tokenizer& tokenizer,
                                                  const PreprocessCallbacks& callbacks) {
  const engine::Timer timer;
  if (options.input.empty()) return absl::InvalidArgumentError("no input given (--input)");
  if (options.output_prefix.empty()) {
    return absl::InvalidArgumentError("no output prefix given (--output-prefix)");
  }
  if (options.json_keys.empty()) return absl::InvalidArgumentError("--json-keys is empty");
  for (size_t i = 0; i < options.json_keys.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (options.json_keys[i] == options.json_keys[j]) {
        return absl::InvalidArgumentError(
            absl::StrCat("--json-keys: key '", options.json_keys[i], "' given twice"));
      }
    }
  }
  if (options.workers < 1 || options.workers > kMaxPreprocessWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers must be in [1, ", kMaxPreprocessWorkers, "], got ", options.workers));
  }
  if (options.chunk_bytes < 1 || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--chunk-kib: the chunk size must be in [1, ",
                                                   kMaxChunkBytes, "] bytes, got ",
                                                   options.chunk_bytes));
  }
  if (options.append_eod && tokenizer.special().eod < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--append-eod: tokenizer ", tokenizer.name(),
                                                   " has no end-of-document token"));
  }
  CorpusFormat format = options.format;
  if (format == CorpusFormat::kAuto) {
    format = options.input == "-" || absl::EndsWith(options.input, ".jsonl") ||
                     absl::EndsWith(options.input, ".json")
                 ? CorpusFormat::kJsonl
                 : CorpusFormat::kText;
  }
  if (format == CorpusFormat::kText &&
      (options.json_keys.size() != 1 || options.json_keys[0] != "text")) {
    return absl::InvalidArgumentError(
        "--json-keys applies to JSONL input only (plain text has the single key 'text')");
  }

  const TokenDType dtype = token_dtype_for_vocab(tokenizer.vocab_size());
  const size_t item = token_dtype_size(dtype);
  std::vector<Sink> sinks(options.json_keys.size());
  for (size_t i = 0; i < sinks.size(); ++i) {
    sinks[i].stats.prefix = preprocess_output_prefix(options.output_prefix, options.json_keys[i],
                                                     options.split_sentences);
    sinks[i].stats.dtype = dtype;
    for (const char* ext : {".bin", ".idx"}) {
      const std::string path = sinks[i].stats.prefix + ext;
      ANVIL_RETURN_IF_ERROR(check_not_input(options.input, path));
      ANVIL_ASSIGN_OR_RETURN(const std::vector<std::string> removed, remove_stale_temps(path));
      for (const std::string& r : removed) {
        if (callbacks.warning) {
          callbacks.warning(absl::StrCat("removed ", r, ", left by an interrupted run"));
        }
      }
    }
    ANVIL_ASSIGN_OR_RETURN(sinks[i].writer,
                           IndexedDatasetWriter::create(sinks[i].stats.prefix, dtype));
  }

  Pipeline pipeline(options, format, tokenizer, callbacks.cancelled);
  ANVIL_RETURN_IF_ERROR(pipeline.start());
  PreprocessStats stats;
  int reported[kNumProblemKinds] = {0, 0, 0};
  // ~Pipeline stops the threads and ~IndexedDatasetWriter removes the temporaries.
  const absl::Status interrupted =
      absl::CancelledError("interrupted; the unfinished outputs were removed");
  ChunkResult r;
  while (pipeline.next(&r)) {
    if (callbacks.cancelled && callbacks.cancelled()) return interrupted;
    // Problems first: a fatal line's predecessors are reported before the error.
    for (const auto& [kind, message] : r.problems) {
      if (reported[kind] < options.max_reported && callbacks.warning) callbacks.warning(message);
      if (reported[kind] == options.max_reported && callbacks.warning) {
        callbacks.warning(
            absl::StrCat("further ", kProblemNames[kind], " are only counted (see the summary)"));
      }
      if (reported[kind] <= options.max_reported) ++reported[kind];
    }
    if (!r.error.ok()) return r.error;  // ~Pipeline stops the threads, ~Writer removes files
    for (size_t k = 0; k < sinks.size(); ++k) {
      ANVIL_RETURN_IF_ERROR(write_key_output(r.keys[k], item, &sinks[k]));
    }
    stats.input_bytes += r.bytes;
    stats.lines += r.lines;
    stats.records += r.records;
    stats.blank_lines += r.blank_lines;
    stats.bad_lines += r.bad_lines;
    stats.invalid_utf8 += r.invalid_utf8;
    if (callbacks.progress) {
      callbacks.progress(stats.input_bytes, static_cast<uint64_t>(stats.records));
    }
  }
  if (callbacks.cancelled && callbacks.cancelled()) return interrupted;
  ANVIL_RETURN_IF_ERROR(pipeline.read_status());
  pipeline.stop();
  for (Sink& sink : sinks) {
    ANVIL_RETURN_IF_ERROR(sink.writer->finish());
    stats.outputs.push_back(sink.stats);
  }
  stats.seconds = timer.seconds();
  return stats;
}

}  // namespace anvil::io
