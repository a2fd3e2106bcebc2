// bin/train's [parallel] section: the process layout (tp x dp x pp over the launched ranks),
// ZeRO stage, gradient bucket size and the collective watchdog, declared in the ini schema and
// validated against the world size and the batch shape up front, with errors naming the numbers:
//   "x.ini:9: [train] global_batch: 12 is not a multiple of micro_batch 4 * dp 2 = 8".
// Every value is checked against the world size, the batch and the model, with the numbers in
// the message (docs/parallelism.md describes the layouts).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"

namespace anvil::parallel {

// Transformer layers of one model at most (planning and the parameter table walk every layer;
// the largest published models have about 100-200), and so pipeline chunks at most.
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;                       // resolved: [parallel] dp, or world / (tp * pp) for dp = 0
  int zero_stage = 0;               // 0: replicated optimizer; 1: optimizer state sharded over DP
  double bucket_mb = 100.0;         // MiB of f32 gradient per all-reduce bucket; 0 = one bucket
  double timeout_s = 600.0;         // collective watchdog (whole numbers in the ini)
  bool reduce_single_rank = false;  // run the DP reduction path even when dp = 1
  int virtual_stages = 1;           // model chunks per pipeline stage (interleaved 1F1B when > 1)
  std::string recompute = "none";   // none | selective | full
  bool sequence_parallel = false;   // Megatron's sequence parallelism (with tp > 1)
  std::string pipeline_partition = "balanced";  // or "type:transformer|embedding"
  int pp_split_rank = 0;  // T5: stages [0, split) hold the encoder (resolved; model/t5/t5.h)
  // ZeRO-Offload: f32 master weights and AdamW moments of this rank's optimizer state in
  // (pinned) host memory, the AdamW step on the host (parallel/offload_optimizer.h).
  bool offload_optimizer = false;
  int offload_threads = 0;  // host AdamW threads; 0 = the host's hardware threads

  int64_t bucket_elems() const { return static_cast<int64_t>(bucket_mb * (1 << 20) / 4); }
};

// Adds the [parallel] keys to bin/train's schema.
void add_parallel_schema(engine::ConfigSchema& schema);

// Layers of each global model chunk (pp * virtual_stages chunks, chunk k = stage k % pp's local
// chunk k / pp). "balanced": layers split as evenly as possible, the first chunks taking one
// more; "type:transformer|embedding": Megatron's partition that counts the embedding and the LM
// head as one layer each (the first and last chunk then hold one transformer layer fewer where
// the counts allow). InvalidArgument when a chunk would get no layer.
absl::StatusOr<std::vector<std::vector<int64_t>>> partition_layers(int64_t n_layers, int64_t chunks,
                                                                   const std::string& method);

// The layout rules, each checked by these functions and worded here only (a config error adds
// the file, section and key in front; the trainer and the models' shards their own prefix).
// The global batch splits into whole micro-batches on each of dp data-parallel ranks:
//   "16 is not a multiple of [train] micro_batch 2 * [parallel] dp 16 = 32"
absl::Status check_batch_split(int64_t global_batch, int64_t micro_batch, int64_t dp);
// A dimension split over the tp tensor-parallel ranks (heads, FFN units, the padded vocabulary):
//   "[model] n_heads 12 is not divisible by [parallel] tp 5"
absl::Status check_tp_split(std::string_view what, int64_t n, int64_t tp);

// Reads and validates [parallel] of a loaded config for `world_size` launched ranks and the
// [train] batch shape (global_batch must split into micro_batch * dp chunks).
absl::StatusOr<ParallelConfig> parse_parallel_config(const engine::Config& c, int world_size,
                                                     int64_t global_batch, int64_t micro_batch);

}  // namespace anvil::parallel
