// ProcessGrid: rank <-> (tp, dp, pp) arithmetic and the member lists of this rank's groups.
#include "parallel/grid.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"

namespace anvil::parallel {

std::string ProcessGroup::describe() const {
  if (!is_member()) return absl::StrCat(name, " group (not a member)");
  return absl::StrCat(name, " group ", id, " of ranks {", absl::StrJoin(ranks, ", "), "}");
}

absl::StatusOr<ProcessGrid> ProcessGrid::create(int world, int rank, int tp, int pp, int dp) {
  if (world < 1) return absl::InvalidArgumentError(absl::StrCat("world size ", world, " < 1"));
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside [0, ", world, ") (world size ", world, ")"));
  }
  if (tp < 1 || pp < 1 || dp < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel sizes must be tp >= 1, pp >= 1, dp >= 0 (0 = inferred), got tp ", tp,
                     ", pp ", pp, ", dp ", dp));
  }
  if (world % (tp * pp) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "world size %d is not divisible by tp * pp = %d * %d = %d", world, tp, pp, tp * pp));
  }
  if (dp == 0) dp = world / (tp * pp);
  if (tp * dp * pp != world) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tp * dp * pp = %d * %d * %d = %d does not equal the world size %d (set dp = 0 to infer "
        "it)",
        tp, dp, pp, tp * dp * pp, world));
  }
  ProcessGrid g;
  g.world_ = world;
  g.rank_ = rank;
  g.tp_ = tp;
  g.dp_ = dp;
  g.pp_ = pp;
  const int t = g.tp_rank(), d = g.dp_rank(), p = g.pp_rank();

  g.tp_group_.name = "tp";
  g.tp_group_.id = d + p * dp;
  for (int i = 0; i < tp; ++i) g.tp_group_.ranks.push_back(g.rank_of(i, d, p));
  g.tp_group_.index = t;

  g.dp_group_.name = "dp";
  g.dp_group_.id = t + p * tp;
  for (int i = 0; i < dp; ++i) g.dp_group_.ranks.push_back(g.rank_of(t, i, p));
  g.dp_group_.index = d;

  g.pp_group_.name = "pp";
  g.pp_group_.id = t + d * tp;
  for (int i = 0; i < pp; ++i) g.pp_group_.ranks.push_back(g.rank_of(t, d, i));
  g.pp_group_.index = p;

  g.embedding_group_.name = "embedding";
  if (g.is_first_stage() || g.is_last_stage()) {
    g.embedding_group_.id = t + d * tp;  // one per pipeline
    g.embedding_group_.ranks.push_back(g.rank_of(t, d, 0));
    if (pp > 1) g.embedding_group_.ranks.push_back(g.rank_of(t, d, pp - 1));
    g.embedding_group_.index = g.is_first_stage() ? 0 : 1;
  }
  g.world_group_.name = "world";
  g.world_group_.id = 0;
  for (int i = 0; i < world; ++i) g.world_group_.ranks.push_back(i);
  g.world_group_.index = rank;
  return g;
}

int ProcessGrid::rank_of(int tp_rank, int dp_rank, int pp_rank) const {
  ANVIL_CHECK_MSG(tp_rank >= 0 && tp_rank < tp_ && dp_rank >= 0 && dp_rank < dp_ && pp_rank >= 0 &&
                      pp_rank < pp_,
                  absl::StrFormat("grid coordinates (tp %d, dp %d, pp %d) outside tp %d x dp %d "
                                  "x pp %d",
                                  tp_rank, dp_rank, pp_rank, tp_, dp_, pp_));
  return tp_rank + dp_rank * tp_ + pp_rank * tp_ * dp_;
}

std::string ProcessGrid::describe() const {
  return absl::StrFormat("rank %d of %d: tp %d/%d, dp %d/%d, pp %d/%d", rank_, world_, tp_rank(),
                         tp_, dp_rank(), dp_, pp_rank(), pp_);
}

}  // namespace anvil::parallel
