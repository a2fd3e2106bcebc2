// bin/preprocess: turns a corpus into Megatron indexed datasets (Megatron's
// tools/preprocess_data.py; the work is io/preprocess), or merges datasets
// (tools/merge_preprocessed_data.py). Flags follow Megatron's; see kUsage.
// Errors print one line "preprocess: <message>" and exit 1; warnings go to stderr, the summary
// to stdout. SIGINT/SIGTERM only set a flag: the work stops, the temporaries are removed and
// the exit status is 128 + the signal number.
#include "io/preprocess.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/log.h"
#include "io/tokenizer.h"

namespace {

namespace io = anvil::io;
using anvil::engine::format_bytes;
using anvil::engine::format_duration;

// --vocab-extra-ids: T5 uses 100; more than a million sentinels is a typo.
constexpr int64_t kMaxVocabExtraIds = 1 << 20;

constexpr char kUsage[] =
    "usage: preprocess --input FILE --output-prefix P --tokenizer-type T [options]\n"
    "       preprocess --merge P1 P2 [...] --output-prefix OUT\n"
    "Tokenizes a corpus into Megatron .bin/.idx datasets P_{key}_document (P_{key}_sentence\n"
    "with --split-sentences), byte-compatible with Megatron's tools/preprocess_data.py.\n"
    "  --input FILE            JSONL (one JSON object per line) or plain text (one document per\n"
    "                          blank-line-separated paragraph); '-' = stdin\n"
    "  --output-prefix P       output prefix\n"
    "  --json-keys K [K ...]   JSONL keys to tokenize, one dataset each (default: text)\n"
    "  --input-format F        auto (default: .json/.jsonl and stdin -> jsonl, else text),\n"
    "                          text, jsonl\n"
    "  --tokenizer-type T      GPT2BPE | BertWordPieceLowerCase | BertWordPieceCase |\n"
    "                          SentencePiece | HF | Byte (Megatron's names GPT2BPETokenizer,\n"
    "                          PretrainedFromHF, HFTokenizer, SentencePieceTokenizer work too)\n"
    "  --vocab-file F          encoder.json / vocab.json, vocab.txt, .model, tokenizer.json or\n"
    "                          its directory (aliases: --tokenizer-model,\n"
    "                          --tokenizer-name-or-path)\n"
    "  --merge-file F          GPT-2 merges (vocab.bpe / merges.txt)\n"
    "  --vocab-extra-ids N     add N sentinel tokens <extra_id_0..N-1> (T5)\n"
    "  --append-eod            append the end-of-document token to each document\n"
    "  --split-sentences       one sequence per sentence (rule-based English splitter, see\n"
    "                          io/sentence_splitter.h; Megatron uses NLTK punkt)\n"
    "  --keep-newlines         with --split-sentences: keep the whitespace after a sentence\n"
    "  --workers N             tokenizing threads, 1 to 1024 (default: the number of cores)\n"
    "  --stop-on-bad-lines     stop at the first malformed JSONL line (default)\n"
    "  --skip-bad-lines        skip malformed JSONL lines, count them in the summary\n"
    "  --max-reported N        report the first N problems of each kind (default 10)\n"
    "  --chunk-kib N           KiB of input per unit of work, 1 to 1048576 (default 256)\n"
    "  --no-progress           no progress bar\n"
    "  --merge P1 P2 ...       concatenate datasets (same dtype) into --output-prefix\n"
    "                          (alias: --datasets, as merge_preprocessed_data.py)\n"
    "Accepted for Megatron compatibility: --dataset-impl mmap, --lang english, --log-interval N.\n"
    "SIGINT/SIGTERM stop the run and remove its temporaries (exit status 128 + the signal);\n"
    "temporaries that a killed run left for the same outputs are removed at the next run.\n";

// The SIGINT/SIGTERM received, or 0; polled through PreprocessCallbacks::cancelled.
std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal.store(sig); }
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only use lock-free");

bool interrupted() { return g_signal.load() != 0; }

// The exit status after an interruption, with the message (temporaries are already removed).
int interrupted_exit() {
  const int sig = g_signal.load();
  std::fprintf(stderr, "preprocess: interrupted by %s; the unfinished outputs were removed\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 128 + sig;
}

// CPU seconds used by the whole process so far (all threads, user + system).
double cpu_seconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int fail(const std::string& message) {
  std::fprintf(stderr, "preprocess: %s\n", message.c_str());
  return 1;
}

// "1.23M", "45.6K", "789".
std::string count(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fB", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fK", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

std::string dtype_name(io::TokenDType t) {
  return t == io::TokenDType::kU16 ? "uint16" : t == io::TokenDType::kI32 ? "int32" : "other";
}

// Megatron's tokenizer class names -> ours.
std::string canonical_tokenizer_type(const std::string& t) {
  if (t == "GPT2BPETokenizer") return "GPT2BPE";
  if (t == "PretrainedFromHF" || t == "HFTokenizer" || t == "HuggingFaceTokenizer") return "HF";
  if (t == "SentencePieceTokenizer" || t == "GPTSentencePieceTokenizer") return "SentencePiece";
  return t;
}

int run_merge(const std::vector<std::string>& inputs, const std::string& output_prefix) {
  anvil::engine::Timer timer;
  auto merged = io::merge_datasets(inputs, output_prefix, interrupted);
  if (!merged.ok()) {
    if (absl::IsCancelled(merged.status()) && interrupted()) return interrupted_exit();
    return fail(std::string(merged.status().message()));
  }
  for (const std::string& r : merged->removed_temporaries) {
    std::fprintf(stderr, "preprocess: warning: removed %s, left by an interrupted run\n",
                 r.c_str());
  }
  std::printf(
      "preprocess: merged %zu datasets into %s.{bin,idx}: %lld documents, %lld "
      "sequences, %s (%s) in %s\n",
      inputs.size(), output_prefix.c_str(), static_cast<long long>(merged->documents),
      static_cast<long long>(merged->sequences),
      format_bytes(static_cast<double>(merged->bytes)).c_str(), dtype_name(merged->dtype).c_str(),
      format_duration(timer.seconds()).c_str());
  return 0;
}

int run(int argc, char** argv) {
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  io::PreprocessOptions opt;
  opt.workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1,
                           io::kMaxPreprocessWorkers);
  io::TokenizerOptions tok;
  bool progress_enabled = true;
  std::vector<std::string> merge_inputs;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string inline_value;
    bool has_inline = false;
    if (absl::StartsWith(flag, "--") && flag.find('=') != std::string::npos) {
      inline_value = flag.substr(flag.find('=') + 1);
      flag = flag.substr(0, flag.find('='));
      has_inline = true;
    }
    // The value of a flag that takes one: "--flag=v" or "--flag v".
    auto value = [&](std::string* out) -> bool {
      if (has_inline) {
        *out = inline_value;
        return true;
      }
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    // Several space-separated values (Megatron's nargs='+'), or "--flag=a,b".
    auto values = [&](std::vector<std::string>* out) -> bool {
      out->clear();
      if (has_inline) {
        *out = absl::StrSplit(inline_value, ',', absl::SkipEmpty());
      } else {
        while (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
          out->push_back(args[++i]);
        }
      }
      return !out->empty();
    };
    auto missing = [&]() { return fail(absl::StrFormat("%s needs a value (see --help)", flag)); };
    // An integer flag in [min, max]: 0, or the exit status of a message naming the flag, the
    // value and the range.
    auto int_flag = [&](int64_t* out, int64_t min, int64_t max) -> int {
      std::string v;
      if (!value(&v)) return missing();
      if (!absl::SimpleAtoi(v, out) || *out < min || *out > max) {
        return fail(absl::StrFormat("%s: '%s' is not an integer in [%d, %d]", flag, v, min, max));
      }
      return 0;
    };
    int64_t number = 0;
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (flag == "--input") {
      if (!value(&opt.input)) return missing();
    } else if (flag == "--output-prefix") {
      if (!value(&opt.output_prefix)) return missing();
    } else if (flag == "--json-keys") {
      if (!values(&opt.json_keys)) return missing();
    } else if (flag == "--input-format") {
      std::string f;
      if (!value(&f)) return missing();
      if (f == "auto") {
        opt.format = io::CorpusFormat::kAuto;
      } else if (f == "text") {
        opt.format = io::CorpusFormat::kText;
      } else if (f == "jsonl" || f == "json") {
        opt.format = io::CorpusFormat::kJsonl;
      } else {
        return fail(absl::StrFormat("--input-format: unknown format '%s' (auto, text, jsonl)", f));
      }
    } else if (flag == "--tokenizer-type") {
      if (!value(&tok.type)) return missing();
      tok.type = canonical_tokenizer_type(tok.type);
    } else if (flag == "--vocab-file" || flag == "--tokenizer-model" ||
               flag == "--tokenizer-name-or-path") {
      if (!value(&tok.vocab_file)) return missing();
    } else if (flag == "--merge-file") {
      if (!value(&tok.merge_file)) return missing();
    } else if (flag == "--vocab-extra-ids") {
      if (int rc = int_flag(&number, 0, kMaxVocabExtraIds)) return rc;
      tok.vocab_extra_ids = static_cast<int>(number);
    } else if (flag == "--append-eod" && !has_inline) {
      opt.append_eod = true;
    } else if (flag == "--split-sentences" && !has_inline) {
      opt.split_sentences = true;
    } else if (flag == "--keep-newlines" && !has_inline) {
      opt.keep_newlines = true;
    } else if (flag == "--workers") {
      if (int rc = int_flag(&number, 1, io::kMaxPreprocessWorkers)) return rc;
      opt.workers = static_cast<int>(number);
    } else if (flag == "--skip-bad-lines" && !has_inline) {
      opt.skip_bad_lines = true;
    } else if (flag == "--stop-on-bad-lines" && !has_inline) {
      opt.skip_bad_lines = false;
    } else if (flag == "--max-reported") {
      if (int rc = int_flag(&number, 0, std::numeric_limits<int>::max())) return rc;
      opt.max_reported = static_cast<int>(number);
    } else if (flag == "--chunk-kib") {
      if (int rc = int_flag(&number, 1, io::kMaxChunkBytes >> 10)) return rc;
      opt.chunk_bytes = static_cast<size_t>(number) << 10;
    } else if (flag == "--no-progress" && !has_inline) {
      progress_enabled = false;
    } else if (flag == "--merge" || flag == "--datasets") {
      if (!values(&merge_inputs)) return missing();
    } else if (flag == "--dataset-impl") {
      std::string v;
      if (!value(&v)) return missing();
      if (v != "mmap") return fail("--dataset-impl: only 'mmap' is supported");
    } else if (flag == "--lang") {
      std::string v;
      if (!value(&v)) return missing();
      if (v != "english") return fail("--lang: only 'english' sentence splitting is supported");
    } else if (flag == "--log-interval") {
      std::string v;
      if (!value(&v)) return missing();  // the progress bar replaces Megatron's log lines
    } else {
      return fail(absl::StrFormat("unknown argument '%s' (see --help)", args[i]));
    }
  }
  if (!merge_inputs.empty()) {
    if (opt.output_prefix.empty()) return fail("--merge needs --output-prefix");
    return run_merge(merge_inputs, opt.output_prefix);
  }
  if (opt.input.empty() || opt.output_prefix.empty()) {
    return fail("--input and --output-prefix are required (see --help)");
  }
  if (tok.type.empty()) return fail("--tokenizer-type is required (see --help)");

  anvil::engine::Timer load_timer;
  auto tokenizer = io::make_tokenizer(tok);
  if (!tokenizer.ok()) return fail(std::string(tokenizer.status().message()));
  const io::Tokenizer& tokenizer_ref = **tokenizer;
  std::fprintf(stderr,
               "preprocess: tokenizer %s, vocabulary %lld, eod %d (loaded in %s), %d "
               "workers\n",
               tokenizer_ref.name().c_str(), static_cast<long long>(tokenizer_ref.vocab_size()),
               tokenizer_ref.special().eod, format_duration(load_timer.seconds()).c_str(),
               opt.workers);

  // The total is only known for a regular file; ProgressBar shows amounts and rates otherwise.
  uint64_t total = 0;
  struct stat st;
  if (opt.input != "-" && ::stat(opt.input.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    total = static_cast<uint64_t>(st.st_size);
  }
  anvil::engine::ProgressBar bar("preprocess", total, progress_enabled);
  const bool live_bar = progress_enabled && isatty(2);
  bool drawn = false;
  io::PreprocessCallbacks callbacks;
  callbacks.cancelled = interrupted;
  callbacks.progress = [&](uint64_t bytes, uint64_t docs) {
    bar.update(bytes, docs);
    drawn = true;
  };
  callbacks.warning = [&](const std::string& message) {
    // Clear a live bar's line first; the next update redraws it below the warning.
    std::fprintf(stderr, "%spreprocess: warning: %s\n", live_bar && drawn ? "\r\x1b[K" : "",
                 message.c_str());
  };
  const double cpu_before = cpu_seconds();
  auto stats_or = io::preprocess_corpus(opt, tokenizer_ref, callbacks);
  const double cpu = cpu_seconds() - cpu_before;
  if (!stats_or.ok()) {
    if (live_bar && drawn) std::fputs("\r\x1b[K", stderr);
    if (absl::IsCancelled(stats_or.status()) && interrupted()) return interrupted_exit();
    std::string message(stats_or.status().message());
    // A malformed line ("input:LINE: ..."): say how to get past it.
    const std::string name = opt.input == "-" ? "<stdin>" : opt.input;
    const std::string rest = message.substr(std::min(message.size(), name.size() + 1));
    if (!opt.skip_bad_lines && absl::StartsWith(message, name + ":") && !rest.empty() &&
        absl::ascii_isdigit(static_cast<unsigned char>(rest[0]))) {
      message += " (--skip-bad-lines skips such lines)";
    }
    return fail(message);
  }
  bar.finish();
  const io::PreprocessStats& s = *stats_or;
  const double rate = s.seconds > 0 ? static_cast<double>(s.input_bytes) / s.seconds : 0.0;
  // Per CPU-second: the per-core rate, whatever the machine's load and the thread count.
  const double cpu_rate = cpu > 0 ? static_cast<double>(s.input_bytes) / cpu : 0.0;
  std::printf("preprocess: read %s in %s: %s/s, %s records/s; %.1fs CPU = %s/s per core\n",
              format_bytes(static_cast<double>(s.input_bytes)).c_str(),
              format_duration(s.seconds).c_str(), format_bytes(rate).c_str(),
              count(s.seconds > 0 ? s.records / s.seconds : 0.0).c_str(), cpu,
              format_bytes(cpu_rate).c_str());
  std::printf("preprocess: %lld lines = %lld records + %lld blank + %lld skipped malformed\n",
              static_cast<long long>(s.lines), static_cast<long long>(s.records),
              static_cast<long long>(s.blank_lines), static_cast<long long>(s.bad_lines));
  if (s.invalid_utf8 > 0) {
    std::printf("preprocess: texts with invalid UTF-8 (tokenized with U+FFFD): %lld\n",
                static_cast<long long>(s.invalid_utf8));
  }
  for (const io::PreprocessOutput& o : s.outputs) {
    std::string sentences;
    if (opt.split_sentences) {
      sentences = absl::StrFormat("%s sentences, ", count(static_cast<double>(o.sequences)));
    }
    std::printf(
        "preprocess: wrote %s.{bin,idx}: %lld documents, %s%s tokens, %s (%s); %lld "
        "empty documents skipped\n",
        o.prefix.c_str(), static_cast<long long>(o.documents), sentences.c_str(),
        count(static_cast<double>(o.tokens)).c_str(),
        format_bytes(static_cast<double>(o.bytes)).c_str(), dtype_name(o.dtype).c_str(),
        static_cast<long long>(o.empty_documents));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
