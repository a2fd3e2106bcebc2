// Trainer's parallel plumbing: the groups'
// communicators (MPI or TCP on the CPU, NCCL bootstrapped over MPI or the store on CUDA), and
// the reductions of host scalars and of the gradient norm over the model-parallel ranks (see
// trainer.h).
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/train/pipeline_runner.h"
#include "model/train/trainer.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/grid.h"
#include "parallel/group_comm.h"
#include "parallel/group_comms.h"
#include "parallel/nccl_comm.h"
#include "parallel/scalar_reduce.h"

namespace anvil::model {

absl::Status Trainer::setup_parallel(const TrainerParallel& par, int cuda_device) {
  const parallel::ParallelConfig& pc = cfg_.parallel;
  const bool cuda = prec_.device == engine::Device::kCuda;
  const bool need_dp = dp_size_ > 1 || pc.reduce_single_rank;
  if (!need_dp && tp_size_ == 1 && pp_size_ == 1) return absl::OkStatus();
  if (cuda) {
    ANVIL_ASSIGN_OR_RETURN(scalar_arena_,
                           engine::Arena::create(prec_.device, 256, "trainer scalar"));
    ANVIL_ASSIGN_OR_RETURN(scalar_, scalar_arena_.allocate(engine::DType::kF64, {1}, "scalar"));
  }
  parallel::CommOptions copt;
  copt.timeout_s = pc.timeout_s;
  const parallel::ProcessGroup one{"dp", 0, {0}, 0};
  // The group's Comm (parallel/group_comm.h).
  auto comm_for = [&](const parallel::ProcessGroup& group,
                      parallel::Comm* cpu) -> absl::StatusOr<parallel::Comm*> {
    return parallel::group_comm(
        group, cpu, par.store, par.grid ? par.grid->rank() : 0, cuda, copt,
        dp_size_ == 1 && need_dp ? " (or unset [parallel] reduce_single_rank)" : "", &owned_comms_);
  };
  parallel::GroupComms* m = par.comms;
  if (need_dp) {
    ANVIL_ASSIGN_OR_RETURN(
        dp_comm_, comm_for(par.grid ? par.grid->dp_group() : one, m ? m->dp.get() : nullptr));
  }
  if (tp_size_ > 1) {
    ANVIL_ASSIGN_OR_RETURN(tp_comm_, comm_for(par.grid->tp_group(), m ? m->tp.get() : nullptr));
  }
  if (pp_size_ > 1) {
    ANVIL_ASSIGN_OR_RETURN(pp_comm_, comm_for(par.grid->pp_group(), m ? m->pp.get() : nullptr));
    if (uses_embedding_group(cfg_) && (par.grid->is_first_stage() || par.grid->is_last_stage())) {
      ANVIL_ASSIGN_OR_RETURN(
          embedding_comm_, comm_for(par.grid->embedding_group(), m ? m->embedding.get() : nullptr));
    }
  }
  (void)cuda_device;
  return absl::OkStatus();
}

double Trainer::model_parallel_sum(double v) {
  using parallel::ReduceOp;
  if (tp_comm_) v = parallel::all_reduce_scalar(*tp_comm_, v, ReduceOp::kSum, scalar_, *stream_);
  if (pp_comm_) v = parallel::all_reduce_scalar(*pp_comm_, v, ReduceOp::kSum, scalar_, *stream_);
  return v;
}

double Trainer::grad_sum_squares() {
  // After the reductions: the global batch's gradient, equal on every rank. ZeRO holds the
  // reduced gradient in its own pieces only: sum them over DP.
  double ss = model_->grad_sum_squares(*stream_);
  if (zero_) {
    ss = parallel::all_reduce_scalar(*dp_comm_, ss, parallel::ReduceOp::kSum, scalar_, *stream_);
  }
  if (model_->grad_squares_over_tp()) {  // (T5: the model summed its TP group already)
    if (pp_comm_) {
      ss = parallel::all_reduce_scalar(*pp_comm_, ss, parallel::ReduceOp::kSum, scalar_, *stream_);
    }
    return ss;
  }
  return model_parallel_sum(ss);
}

}  // namespace anvil::model
