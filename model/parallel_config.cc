// [parallel] schema and validation (see parallel_config.h).
#include "model/parallel_config.h"

#include "absl/strings/str_format.h"

namespace anvil::model {

void add_parallel_schema(engine::ConfigSchema& s) {
  const engine::ConfigType kInt = engine::ConfigType::kInt, kBool = engine::ConfigType::kBool;
  s.add("parallel", "tp", kInt, "1",
        "Tensor-parallel size (--tensor-model-parallel-size). Only 1 is implemented yet.");
  s.add("parallel", "pp", kInt, "1",
        "Pipeline-parallel size (--pipeline-model-parallel-size). Only 1 is implemented yet.");
  s.add("parallel", "dp", kInt, "0",
        "Data-parallel size; 0 = launched ranks / (tp * pp). Each DP rank runs global_batch / dp "
        "samples per step in micro-batches of [train] micro_batch; the gradients are summed over "
        "DP once per step.");
  s.add("parallel", "zero_stage", kInt, "0",
        "0 = every DP rank holds the whole optimizer state; 1 = AdamW state sharded over DP "
        "(ZeRO-1, Megatron's distributed optimizer). 2 and 3 are not implemented yet.");
  s.add("parallel", "bucket_mb", kInt, "100",
        "MiB of f32 gradient per DP all-reduce bucket (100 MiB = 25M elements); 0 = one bucket.");
  s.add("parallel", "timeout_s", kInt, "600",
        "Collective watchdog: an operation not finished after this many seconds aborts all ranks "
        "with a message naming it, its group and the rank.");
  s.add("parallel", "reduce_single_rank", kBool, "false",
        "Run the DP gradient reduction even with dp = 1 (NCCL or MPI over one rank), to exercise "
        "or time that path; on the CPU it needs an MPI launch (mpirun -np 1).");
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
  if (tp != 1) {
    return c.error("parallel", "tp",
                   absl::StrFormat("tensor parallelism (tp = %d) is not implemented yet; only "
                                   "tp = 1 runs today (see docs/parallelism.md)",
                                   tp));
  }
  if (pp != 1) {
    return c.error("parallel", "pp",
                   absl::StrFormat("pipeline parallelism (pp = %d) is not implemented yet; only "
                                   "pp = 1 runs today (see docs/parallelism.md)",
                                   pp));
  }
  if (zero > 1) {
    return c.error("parallel", "zero_stage",
                   absl::StrFormat("ZeRO stage %d is not implemented yet; use 0 or 1", zero));
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
  if (global_batch % (micro_batch * resolved_dp) != 0) {
    return c.error(
        "train", "global_batch",
        absl::StrFormat("%d is not a multiple of [train] micro_batch %d * [parallel] "
                        "dp %d = %d",
                        global_batch, micro_batch, resolved_dp, micro_batch * resolved_dp));
  }
  const int64_t bucket_mb = c.get_int("parallel", "bucket_mb");
  if (bucket_mb < 0) {
    return c.error("parallel", "bucket_mb", absl::StrFormat("must be >= 0, got %d", bucket_mb));
  }
  const int64_t timeout_s = c.get_int("parallel", "timeout_s");
  if (timeout_s < 1) {
    return c.error("parallel", "timeout_s", absl::StrFormat("must be >= 1, got %d", timeout_s));
  }
  p.tp = static_cast<int>(tp);
  p.pp = static_cast<int>(pp);
  p.dp = static_cast<int>(resolved_dp);
  p.zero_stage = static_cast<int>(zero);
  p.bucket_mb = static_cast<double>(bucket_mb);
  p.timeout_s = static_cast<double>(timeout_s);
  p.reduce_single_rank = c.get_bool("parallel", "reduce_single_rank");
  return p;
}

}  // namespace anvil::model
