// ProcessGrid: the layout of world = TP x DP x PP ranks (DESIGN.md §5), pure arithmetic with no
// communication and no globals. TP is fastest, then DP, then PP (Megatron's "tp-dp-pp" order):
//   rank = tp_rank + dp_rank * TP + pp_rank * TP * DP
// so the ranks of one TP group are consecutive (one node's NVLink domain), DP groups stride by
// TP, and pipeline stages are the slowest-varying coordinate.
//
// Groups a rank belongs to, each an explicit member list of global ranks in group order:
//   tp:        fixed (dp, pp), tp_rank = 0..TP-1
//   dp:        fixed (tp, pp), dp_rank = 0..DP-1
//   pp:        fixed (tp, dp), pp_rank = 0..PP-1      (the pipeline this rank is a stage of)
//   embedding: the first and last stage of this rank's pipeline, where the tied word embedding
//              lives twice and its gradients are summed; only those two stages are members
//              (PP = 1: the one stage, a group of one).
//   world:     all ranks (id 0).
// Every group kind also has an index (`id`) that is equal for the members of one group and
// distinct between groups of that kind: the color for MPI_Comm_split.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::parallel {

struct ProcessGroup {
  std::string name;        // "tp", "dp", "pp", "embedding"
  int id = -1;             // which group of this kind (-1: this rank is not a member)
  std::vector<int> ranks;  // member global ranks, in group order (empty when not a member)
  int index = -1;          // this rank's position in `ranks`, -1 when not a member

  int size() const { return static_cast<int>(ranks.size()); }
  bool is_member() const { return index >= 0; }
  // "dp group 1 of ranks {1, 3}", for error messages.
  std::string describe() const;
};

class ProcessGrid {
 public:
  // tp, pp >= 1; dp = 0 infers world / (tp * pp). InvalidArgument naming the numbers when the
  // sizes do not multiply to world, or rank is outside [0, world).
  static absl::StatusOr<ProcessGrid> create(int world, int rank, int tp, int pp, int dp = 0);

  int world() const { return world_; }
  int rank() const { return rank_; }
  int tp_size() const { return tp_; }
  int dp_size() const { return dp_; }
  int pp_size() const { return pp_; }
  int tp_rank() const { return rank_ % tp_; }
  int dp_rank() const { return rank_ / tp_ % dp_; }
  int pp_rank() const { return rank_ / (tp_ * dp_); }
  bool is_first_stage() const { return pp_rank() == 0; }
  bool is_last_stage() const { return pp_rank() == pp_ - 1; }

  // The global rank at grid coordinates (CHECKs the ranges).
  int rank_of(int tp_rank, int dp_rank, int pp_rank) const;

  const ProcessGroup& tp_group() const { return tp_group_; }
  const ProcessGroup& dp_group() const { return dp_group_; }
  const ProcessGroup& pp_group() const { return pp_group_; }
  const ProcessGroup& embedding_group() const { return embedding_group_; }
  const ProcessGroup& world_group() const { return world_group_; }

  // "rank 5 of 8: tp 1/2, dp 0/2, pp 1/2".
  std::string describe() const;

 private:
  ProcessGrid() = default;
  int world_ = 1, rank_ = 0, tp_ = 1, dp_ = 1, pp_ = 1;
  ProcessGroup tp_group_, dp_group_, pp_group_, embedding_group_, world_group_;
};

}  // namespace anvil::parallel
