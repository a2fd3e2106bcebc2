// [parallel] schema and validation (see parallel_config.h).
#include "parallel/parallel_config.h"

#include "absl/strings/str_format.h"

namespace anvil::parallel {
namespace {

constexpr int64_t kMaxBucketMb = int64_t{1} << 20;        // bucket_elems() stays exact
constexpr int64_t kMaxTimeoutS = (int64_t{1} << 31) - 1;  // 68 years

}  // namespace

void add_parallel_schema(engine::ConfigSchema& s) {
  const engine::ConfigType kInt = engine::ConfigType::kInt, kBool = engine::ConfigType::kBool;
  const engine::ConfigType kStr = engine::ConfigType::kString;
  s.add("parallel", "tp", kInt, "1",
        "Tensor-parallel size (--tensor-model-parallel-size): heads, MLP hidden units and the "
        "padded vocabulary split over tp ranks (n_heads and ffn_hidden divisible by tp; the "
        "vocabulary is padded to a multiple of 128 * tp).");
  s.add("parallel", "pp", kInt, "1",
        "Pipeline-parallel size (--pipeline-model-parallel-size): layers split over pp stages, "
        "1F1B schedule (interleaved with virtual_stages > 1).");
  s.add("parallel", "virtual_stages", kInt, "1",
        "Model chunks per pipeline stage (--num-layers-per-virtual-pipeline-stage expressed as a "
        "count): > 1 runs Megatron's interleaved 1F1B, which needs pp >= 2 and micro-batches "
        "per step divisible by pp.");
  s.add("parallel", "pipeline_partition", kStr, "balanced",
        "Layers per pipeline chunk: balanced, or type:transformer|embedding (embedding and LM "
        "head count as a layer each, as Megatron's partition method).");
  s.add("parallel", "pp_split_rank", kInt, "0",
        "[model] type t5 with pp > 1 (--pipeline-model-parallel-split-rank): stages [0, split) "
        "hold the encoder, [split, pp) the decoder (docs/parallelism.md); the encoder layers must "
        "split evenly over split stages and the decoder layers over pp - split. 0 = pp / 2.");
  s.add("parallel", "recompute", kStr, "none",
        "Activation recomputation (--recompute-granularity): none, selective (attention "
        "probabilities recomputed in backward; with flash attention, which keeps only the "
        "[B, H, T] softmax statistics, there is nothing to recompute and it equals none) or "
        "full (only each layer's input kept). T5 (flash attention only): selective equals "
        "none.");
  s.add("parallel", "sequence_parallel", kBool, "false",
        "Megatron's sequence parallelism (--sequence-parallel, with tp > 1): layernorms, dropout "
        "and the residual stream hold 1/tp of the tokens per TP rank; all-gathers and "
        "reduce-scatters replace the TP all-reduces. micro_batch * seq_len (T5: and micro_batch "
        "* decoder_seq_len) must be divisible by tp. No effect with tp = 1.");
  s.add("parallel", "dp", kInt, "0",
        "Data-parallel size; 0 = launched ranks / (tp * pp). Each DP rank runs global_batch / dp "
        "samples per step in micro-batches of [train] micro_batch; the gradients are summed over "
        "DP once per step.");
  s.add("parallel", "zero_stage", kInt, "0",
        "0 = every DP rank holds the whole optimizer state; 1 = f32 master and AdamW state "
        "sharded over DP (Megatron's distributed optimizer); 2 = also the gradients "
        "(reduce-scattered layer by layer in backward); 3 = also the parameters (gathered layer "
        "by layer before use).");
  s.add("parallel", "offload_optimizer", kBool, "false",
        "DeepSpeed's ZeRO-Offload (--cpu-optimizer, offload_optimizer in the DeepSpeed config): "
        "the f32 master weights and AdamW moments of this rank's optimizer state (its ZeRO shard "
        "with zero_stage 1 or 2) live in pinned host memory and the AdamW step runs on the host "
        "(multi-threaded; bitwise equal to the device step on the CPU; on CUDA the host and the "
        "device AdamW round differently, see docs/performance.md): gradients are copied to the "
        "host and the updated parameters back, chunk by chunk, overlapped with the step. The GPU "
        "then "
        "holds no master weights or optimizer state (bin/train --dry-run shows both plans). Not "
        "with zero_stage 3.");
  s.add("parallel", "offload_threads", kInt, "0",
        "Threads of the offloaded host AdamW (offload_optimizer); 0 = the host's hardware "
        "threads. Ranks sharing a host share its cores: use cores / ranks per host.");
  s.add("parallel", "bucket_mb", kInt, "100",
        "MiB of f32 gradient per DP all-reduce bucket (100 MiB = 25M elements); 0 = one bucket.");
  s.add("parallel", "timeout_s", kInt, "600",
        "Collective watchdog: an operation not finished after this many seconds aborts all ranks "
        "with a message naming it, its group and the rank. Under torchrun also how long ranks "
        "wait for each other at start-up (the rendezvous store and connections).");
  s.add("parallel", "reduce_single_rank", kBool, "false",
        "Run the DP gradient reduction even with dp = 1 (NCCL or MPI over one rank), to exercise "
        "or time that path; on the CPU it needs a launcher (mpirun -np 1, or torchrun).");
}

absl::Status check_batch_split(int64_t global_batch, int64_t micro_batch, int64_t dp) {
  if (micro_batch > 0 && dp > 0 && global_batch % (micro_batch * dp) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%d is not a multiple of [train] micro_batch %d * [parallel] dp %d = %d",
                      global_batch, micro_batch, dp, micro_batch * dp));
}

absl::Status check_tp_split(std::string_view what, int64_t n, int64_t tp) {
  if (tp > 0 && n % tp == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s %d is not divisible by [parallel] tp %d", what, n, tp));
}

absl::StatusOr<ParallelConfig> parse_parallel_config(const engine::Config& c, int world,
                                                     int64_t global_batch, int64_t micro_batch) {
  ParallelConfig p;
  const int64_t tp = c.get_int("parallel", "tp"), pp = c.get_int("parallel", "pp");
  const int64_t dp = c.get_int("parallel", "dp"), zero = c.get_int("parallel", "zero_stage");
  if (tp < 1) return c.error("parallel", "tp", absl::StrFormat("must be >= 1, got %d", tp));
  if (pp < 1) return c.error("parallel", "pp", absl::StrFormat("must be >= 1, got %d", pp));
  if (dp < 0) {
    return c.error("parallel", "dp", absl::StrFormat("must be >= 0 (0 = inferred), got %d", dp));
  }
  if (zero < 0 || zero > 3) {
    return c.error("parallel", "zero_stage", absl::StrFormat("must be 0, 1, 2 or 3, got %d", zero));
  }
  const int64_t v = c.get_int("parallel", "virtual_stages");
  if (v < 1)
    return c.error("parallel", "virtual_stages", absl::StrFormat("must be >= 1, got %d", v));
  if (v > kMaxLayers) {  // every chunk holds a layer
    return c.error("parallel", "virtual_stages",
                   absl::StrFormat("%d exceeds the limit 2^16 = %d", v, kMaxLayers));
  }
  if (v > 1 && pp < 2) {
    return c.error("parallel", "virtual_stages",
                   absl::StrFormat("%d chunks per stage need pp >= 2, got pp %d", v, pp));
  }
  const std::string recompute = c.get_string("parallel", "recompute");
  if (recompute != "none" && recompute != "selective" && recompute != "full") {
    return c.error("parallel", "recompute",
                   absl::StrFormat("expected none, selective or full, got '%s'", recompute));
  }
  const std::string partition = c.get_string("parallel", "pipeline_partition");
  if (partition != "balanced" && partition != "type:transformer|embedding") {
    return c.error(
        "parallel", "pipeline_partition",
        absl::StrFormat("expected balanced or type:transformer|embedding, got '%s'", partition));
  }
  if (world % (tp * pp) != 0) {
    return c.error(
        "parallel", "tp",
        absl::StrFormat("%d launched ranks are not divisible by tp %d * pp %d", world, tp, pp));
  }
  const int64_t resolved_dp = dp == 0 ? world / (tp * pp) : dp;
  if (tp * resolved_dp * pp != world) {
    return c.error("parallel", "dp",
                   absl::StrFormat("tp %d * dp %d * pp %d = %d does not match the %d launched "
                                   "ranks (dp = 0 infers it)",
                                   tp, resolved_dp, pp, tp * resolved_dp * pp, world));
  }
  if (absl::Status s = check_batch_split(global_batch, micro_batch, resolved_dp); !s.ok()) {
    return c.error("train", "global_batch", std::string(s.message()));
  }
  const int64_t bucket_mb = c.get_int("parallel", "bucket_mb");
  if (bucket_mb < 0 || bucket_mb > kMaxBucketMb) {
    return c.error(
        "parallel", "bucket_mb",
        absl::StrFormat("must be in [0, 2^20 = %d] (1 TiB), got %d", kMaxBucketMb, bucket_mb));
  }
  const int64_t timeout_s = c.get_int("parallel", "timeout_s");
  if (timeout_s < 1 || timeout_s > kMaxTimeoutS) {
    return c.error(
        "parallel", "timeout_s",
        absl::StrFormat("must be in [1, 2^31 - 1 = %d], got %d", kMaxTimeoutS, timeout_s));
  }
  p.tp = static_cast<int>(tp);
  p.pp = static_cast<int>(pp);
  p.dp = static_cast<int>(resolved_dp);
  p.zero_stage = static_cast<int>(zero);
  p.bucket_mb = static_cast<double>(bucket_mb);
  p.timeout_s = static_cast<double>(timeout_s);
  p.reduce_single_rank = c.get_bool("parallel", "reduce_single_rank");
  p.virtual_stages = static_cast<int>(v);
  p.recompute = recompute;
  p.sequence_parallel = c.get_bool("parallel", "sequence_parallel");
  p.pipeline_partition = partition;
  p.offload_optimizer = c.get_bool("parallel", "offload_optimizer");
  const int64_t threads = c.get_int("parallel", "offload_threads");
  if (threads < 0 || threads > 4096) {
    return c.error("parallel", "offload_threads",
                   absl::StrFormat("must be in [0, 4096] (0 = hardware threads), got %d", threads));
  }
  p.offload_threads = static_cast<int>(threads);
  if (p.offload_optimizer && zero == 3) {
    return c.error("parallel", "offload_optimizer",
                   "is not implemented with zero_stage 3 (parameters sharded too; DeepSpeed's "
                   "ZeRO-Infinity): use zero_stage 0, 1 or 2");
  }
  const int64_t micro_per_rank = global_batch / (micro_batch * resolved_dp);
  if (v > 1 && micro_per_rank % pp != 0) {
    return c.error("parallel", "virtual_stages",
                   absl::StrFormat("the interleaved schedule needs the micro-batches per step and "
                                   "DP rank (%d = global_batch %d / (micro_batch %d * dp %d)) to "
                                   "be a multiple of pp %d",
                                   micro_per_rank, global_batch, micro_batch, resolved_dp, pp));
  }
  return p;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> partition_layers(int64_t n_layers, int64_t chunks,
                                                                   const std::string& method) {
  // Weighted items: [embedding] + layers + [head] for Megatron's type:transformer|embedding.
  const bool typed = method == "type:transformer|embedding";
  if (!typed && method != "balanced") {
    return absl::InvalidArgumentError("pipeline partition: unknown method '" + method + "'");
  }
  const int64_t items = n_layers + (typed ? 2 : 0);
  if (chunks < 1 || n_layers < chunks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pipeline partition: %d layers cannot fill %d chunks (pp * virtual_stages) with at least "
        "one layer each",
        n_layers, chunks));
  }
  std::vector<std::vector<int64_t>> out;
  int64_t begin = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t count = items / chunks + (k < items % chunks ? 1 : 0);
    std::vector<int64_t> layers;
    for (int64_t i = begin; i < begin + count; ++i) {
      const int64_t layer = typed ? i - 1 : i;
      if (layer >= 0 && layer < n_layers) layers.push_back(layer);
    }
    begin += count;
    if (layers.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "pipeline partition %s: chunk %d of %d gets no transformer layer (%d layers)", method, k,
          chunks, n_layers));
    }
    out.push_back(layers);
  }
  return out;
}

}  // namespace anvil::parallel
