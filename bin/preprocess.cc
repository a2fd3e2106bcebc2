// bin/preprocess: turns a corpus into a Megatron indexed dataset (Megatron's
// tools/preprocess_data.py, without sentence splitting; the work is io/preprocess).
//   build/bin/preprocess --input corpus.txt|corpus.jsonl|- --output-prefix P
//       [--json-keys text [more ...]] [--append-eod] [--tokenizer-type Byte]
//       [--input-format auto|text|jsonl] [--skip-bad-lines] [--no-progress]
// Writes P_{key}_document.{bin,idx}. Errors print one line "preprocess: <message>", exit 1.
#include "io/preprocess.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/log.h"

namespace {

namespace io = anvil::io;
using anvil::engine::format_bytes;
using anvil::engine::format_duration;

constexpr char kUsage[] =
    "usage: preprocess --input FILE --output-prefix PREFIX [options]\n"
    "  --input FILE          corpus: plain text (one document per blank-line-separated\n"
    "                        paragraph) or JSONL (one JSON object per line); '-' = stdin\n"
    "  --output-prefix P     writes P_{key}_document.bin/.idx\n"
    "  --json-keys K [K...]  JSONL keys to tokenize, one dataset each (default: text)\n"
    "  --input-format F      auto (default: .json/.jsonl -> jsonl, else text), text, jsonl\n"
    "  --tokenizer-type T    Byte (bytes 0..255, EOD 256; the only one for now)\n"
    "  --append-eod          append the EOD token to every document\n"
    "  --skip-bad-lines      skip (and count) malformed JSONL lines instead of failing\n"
    "  --no-progress         no progress bar\n";

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

int run(int argc, char** argv) {
  io::PreprocessOptions opt;
  bool progress_enabled = true;
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
    auto missing = [&]() { return fail(absl::StrFormat("%s needs a value", flag)); };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (flag == "--input") {
      if (!value(&opt.input)) return missing();
    } else if (flag == "--output-prefix") {
      if (!value(&opt.output_prefix)) return missing();
    } else if (flag == "--tokenizer-type") {
      if (!value(&opt.tokenizer_type)) return missing();
    } else if (flag == "--json-keys") {
      // Megatron takes several space-separated keys; "--json-keys=a,b" works too.
      opt.json_keys.clear();
      if (has_inline) {
        opt.json_keys = absl::StrSplit(inline_value, ',', absl::SkipEmpty());
      } else {
        while (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
          opt.json_keys.push_back(args[++i]);
        }
      }
      if (opt.json_keys.empty()) return missing();
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
    } else if (flag == "--append-eod" && !has_inline) {
      opt.append_eod = true;
    } else if (flag == "--skip-bad-lines" && !has_inline) {
      opt.skip_bad_lines = true;
    } else if (flag == "--no-progress" && !has_inline) {
      progress_enabled = false;
    } else {
      return fail(absl::StrFormat("unknown argument '%s' (see --help)", args[i]));
    }
  }
  if (opt.input.empty() || opt.output_prefix.empty()) {
    return fail("--input and --output-prefix are required (see --help)");
  }

  // The total is only known for a regular file; ProgressBar shows amounts and rates otherwise.
  uint64_t total = 0;
  struct stat st;
  if (opt.input != "-" && ::stat(opt.input.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    total = static_cast<uint64_t>(st.st_size);
  }
  anvil::engine::Timer timer;
  anvil::engine::ProgressBar bar("preprocess", total, progress_enabled);
  bool drawn = false;
  auto stats_or = io::preprocess_corpus(opt, [&](uint64_t bytes, uint64_t docs) {
    bar.update(bytes, docs);
    drawn = true;
  });
  if (!stats_or.ok()) {
    // End a live bar's line so the error starts on its own.
    if (drawn && progress_enabled && isatty(2)) std::fputc('\n', stderr);
    return fail(std::string(stats_or.status().message()));
  }
  bar.finish();
  const io::PreprocessStats& s = *stats_or;
  const double seconds = timer.seconds();
  std::printf("preprocess: read %s, %lld documents in %s (%s/s)\n",
              format_bytes(static_cast<double>(s.input_bytes)).c_str(),
              static_cast<long long>(s.input_documents), format_duration(seconds).c_str(),
              format_bytes(seconds > 0 ? s.input_bytes / seconds : 0.0).c_str());
  if (s.skipped_lines > 0) {
    std::printf("preprocess: skipped %lld malformed lines\n",
                static_cast<long long>(s.skipped_lines));
  }
  for (const io::PreprocessOutput& o : s.outputs) {
    std::printf("preprocess: wrote %s.{bin,idx}: %lld documents, %s tokens, %s\n", o.prefix.c_str(),
                static_cast<long long>(o.documents), count(static_cast<double>(o.tokens)).c_str(),
                format_bytes(static_cast<double>(o.bytes)).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
