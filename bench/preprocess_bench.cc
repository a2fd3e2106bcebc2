// bin/preprocess throughput: preprocess_corpus end to end (read, JSON parse, tokenize, write
// .bin/.idx) on the KJV demo corpus as JSONL (data/demo/kjv.txt from
// scripts/prepare-demo-data.sh, one {"text": chapter} line per blank-line-separated chapter),
// in bytes of JSONL per second (wall) and MB per CPU-second of all threads (MB_per_cpu_s, the
// per-core rate). Target: >= 20 MB/s per core with GPT-2 BPE (issue 3).
//   Preprocess/Gpt2/workers:N      GPT-2 BPE (data/gpt2/encoder.json + vocab.bpe), N threads
//   Preprocess/Gpt2Split/workers:1 ... with --split-sentences
//   Preprocess/Byte/workers:1      the byte tokenizer: the pipeline's own cost (JSON, I/O)
//   build/bench/preprocess_bench [--benchmark_filter=Gpt2]
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "io/preprocess.h"
#include "io/tokenizer.h"

namespace anvil::io {
namespace {

// Repository-relative paths, found from this file's location (absolute in CMake builds).
std::string repo_path(const std::string& rel) {
  std::string here = __FILE__;
  for (int k = 0; k < 2; ++k) {
    const size_t slash = here.rfind('/');
    if (slash == std::string::npos) return rel;
    here.resize(slash);
  }
  return here + "/" + rel;
}

// JSON string literal of `s` (escapes quotes, backslashes and control characters).
std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The KJV chapters as a JSONL file in /tmp, written once and removed at exit; empty when
// kjv.txt is missing.
std::string* g_jsonl = nullptr;
struct RemoveAtExit {
  ~RemoveAtExit() {
    if (g_jsonl != nullptr && !g_jsonl->empty()) std::remove(g_jsonl->c_str());
  }
} remove_at_exit;

const std::string& jsonl_path() {
  if (g_jsonl != nullptr) return *g_jsonl;
  g_jsonl = new std::string();  // leaked on purpose: RemoveAtExit reads it at exit
  std::ifstream f(repo_path("data/demo/kjv.txt"), std::ios::binary);
  if (!f) return *g_jsonl;
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const std::string out = "/tmp/anvil_preprocess_bench_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream o(out, std::ios::binary);
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find("\n\n", begin);
    if (end == std::string::npos) end = text.size();
    o << "{\"text\": " << json_quote(text.substr(begin, end - begin)) << "}\n";
    begin = end + 2;
  }
  *g_jsonl = out;
  return *g_jsonl;
}

// CPU seconds of the whole process (all threads, user + system).
double cpu_seconds() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// One iteration = a fresh tokenizer (loaded outside the timing, so its word cache starts
// cold as in a real run) and one preprocess_corpus over the whole file.
void run_preprocess(benchmark::State& state, const TokenizerOptions& tok_options, bool split) {
  if (jsonl_path().empty()) {
    state.SkipWithError("data/demo/kjv.txt missing: run scripts/prepare-demo-data.sh");
    return;
  }
  PreprocessOptions opt;
  opt.input = jsonl_path();
  opt.output_prefix = jsonl_path() + ".out";
  opt.append_eod = true;
  opt.split_sentences = split;
  opt.workers = static_cast<int>(state.range(0));
  uint64_t bytes = 0, tokens = 0;
  double cpu = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto tokenizer = make_tokenizer(tok_options);
    if (!tokenizer.ok()) {
      state.SkipWithError(std::string(tokenizer.status().message()).c_str());
      return;
    }
    state.ResumeTiming();
    const double cpu0 = cpu_seconds();
    auto stats = preprocess_corpus(opt, **tokenizer);
    cpu += cpu_seconds() - cpu0;
    if (!stats.ok()) {
      state.SkipWithError(std::string(stats.status().message()).c_str());
      return;
    }
    bytes += stats->input_bytes;
    tokens += static_cast<uint64_t>(stats->outputs[0].tokens);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  // MB (10^6 bytes) of JSONL per CPU-second of all threads: the per-core rate, independent of
  // the thread count and of other load on the machine.
  state.counters["MB_per_cpu_s"] = static_cast<double>(bytes) / 1e6 / std::max(cpu, 1e-9);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  const std::string prefix = preprocess_output_prefix(opt.output_prefix, "text", split);
  std::remove((prefix + ".bin").c_str());
  std::remove((prefix + ".idx").c_str());
}

TokenizerOptions gpt2() {
  TokenizerOptions t;
  t.type = "GPT2BPE";
  t.vocab_file = repo_path("data/gpt2/encoder.json");
  t.merge_file = repo_path("data/gpt2/vocab.bpe");
  return t;
}

void BM_PreprocessGpt2(benchmark::State& state) { run_preprocess(state, gpt2(), false); }
void BM_PreprocessGpt2Split(benchmark::State& state) { run_preprocess(state, gpt2(), true); }
void BM_PreprocessByte(benchmark::State& state) {
  TokenizerOptions t;
  t.type = "Byte";
  run_preprocess(state, t, false);
}

// Real time: the work runs on the pipeline's threads, not the benchmark thread.
BENCHMARK(BM_PreprocessGpt2)
    ->Name("Preprocess/Gpt2")
    ->ArgName("workers")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PreprocessGpt2Split)
    ->Name("Preprocess/Gpt2Split")
    ->ArgName("workers")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PreprocessByte)
    ->Name("Preprocess/Byte")
    ->ArgName("workers")
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace anvil::io

BENCHMARK_MAIN();
