// Pipeline round execution (see pipeline_runner.h).
#include "model/train/pipeline_runner.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "parallel/comm.h"

namespace anvil::model {

using parallel::PipeOp;
using parallel::PipeTransfer;

namespace {

// Local chunk of this stage that consumes a transfer: the next chunk of an activation, the
// previous chunk of a gradient.
int64_t consumer_chunk(const PipeTransfer& t, int stages) {
  return (t.is_grad ? t.model_chunk - 1 : t.model_chunk + 1) / stages;
}

}  // namespace

int64_t pipeline_slots(const parallel::PipelinePlan& plan, int stages, int stage) {
  (void)stage;
  std::vector<std::set<int>> live;  // per local chunk: micro-batches holding a slot
  auto at = [&](int64_t chunk) -> std::set<int>& {
    if (static_cast<int64_t>(live.size()) <= chunk) live.resize(static_cast<size_t>(chunk + 1));
    return live[static_cast<size_t>(chunk)];
  };
  size_t most = 1;
  for (const parallel::PipeRound& r : plan.rounds) {
    if (r.compute) {
      std::set<int>& l = at(r.compute->chunk);
      if (r.compute->op == PipeOp::kForward) {
        l.insert(r.compute->micro_batch);
      } else {
        l.erase(r.compute->micro_batch);
      }
    }
    for (const PipeTransfer& t : r.recvs) {
      if (!t.is_grad) at(consumer_chunk(t, stages)).insert(t.micro_batch);
    }
    for (const std::set<int>& l : live) most = std::max(most, l.size());
  }
  // Live micro-batches of a chunk are consecutive (inputs arrive and backwards run in order),
  // so `most` slots taken modulo never collide.
  return static_cast<int64_t>(most);
}

std::vector<double> run_pipeline_step(PipelineStage& stage, const parallel::PipelinePlan& plan,
                                      int stages, int stage_index, parallel::Comm* pp,
                                      const PipelineStepFns& fns, engine::Stream& s) {
  const int64_t slots = stage.slots();
  const int64_t n_chunks = stage.chunks();
  const bool post = stage.ends_model();
  int64_t micro_batches = 0;
  for (const parallel::PipeRound& r : plan.rounds) {
    if (r.compute) micro_batches = std::max<int64_t>(micro_batches, r.compute->micro_batch + 1);
  }
  std::vector<double> losses(static_cast<size_t>(micro_batches), 0.0);
  std::vector<parallel::P2pOp> ops;
  for (const parallel::PipeRound& r : plan.rounds) {
    if (r.compute) {
      const parallel::PipeAction& a = *r.compute;
      const int64_t slot = a.micro_batch % slots;
      if (a.op == PipeOp::kForward) {
        stage.forward(a.chunk, slot, a.micro_batch, /*train=*/true,
                      fns.dropout_offset(a.micro_batch), s);
      } else {
        if (fns.before_backward) fns.before_backward(a.micro_batch);
        stage.backward(a.chunk, slot, fns.grad_scale(a.micro_batch), s);
        // Read after the backward is queued: the sync then waits for it instead of stalling it.
        if (post && a.chunk == n_chunks - 1) {
          if (fns.add_loss) {
            fns.add_loss(a.micro_batch, stage.loss_views(slot));
          } else {
            losses[static_cast<size_t>(a.micro_batch)] = stage.loss_sum(slot, s);
          }
        }
      }
    }
    if (r.sends.empty() && r.recvs.empty()) continue;
    ANVIL_CHECK_MSG(pp != nullptr, absl::StrCat("pipeline stage ", stage_index, " of ", stages,
                                                ": the plan transfers data but there is no "
                                                "pipeline group"));
    ops.clear();
    for (const PipeTransfer& t : r.sends) {
      const int64_t c = t.model_chunk / stages;  // the sender's local chunk
      for (const engine::TensorView& v :
           t.is_grad ? stage.sent_grads(c) : stage.sent_activations(c)) {
        ops.push_back({true, v, t.peer_stage});
      }
    }
    for (const PipeTransfer& t : r.recvs) {
      const int64_t c = consumer_chunk(t, stages), slot = t.micro_batch % slots;
      for (const engine::TensorView& v :
           t.is_grad ? stage.received_grads(c, slot) : stage.received_activations(c, slot)) {
        ops.push_back({false, v, t.peer_stage});
      }
    }
    pp->batch_p2p(ops, s);
  }
  return losses;
}

double run_pipeline_forward(PipelineStage& stage, int stages, int stage_index, parallel::Comm* pp,
                            engine::Stream& s) {
  const int64_t total = stage.chunks() * stages;
  for (int64_t k = 0; k < total; ++k) {
    if (k % stages != stage_index) continue;
    const int64_t c = k / stages;
    if (k > 0) {
      std::vector<parallel::P2pOp> ops;
      for (const engine::TensorView& v : stage.received_activations(c, 0)) {
        ops.push_back({false, v, static_cast<int>((k - 1) % stages)});
      }
      pp->batch_p2p(ops, s);
    }
    stage.forward(c, 0, 0, /*train=*/false, 0, s);
    if (k < total - 1) {
      std::vector<parallel::P2pOp> ops;
      for (const engine::TensorView& v : stage.sent_activations(c)) {
        ops.push_back({true, v, static_cast<int>((k + 1) % stages)});
      }
      pp->batch_p2p(ops, s);
    }
  }
  return stage.ends_model() ? stage.loss_sum(0, s) : 0.0;
}

int64_t GptPipelineStage::chunks() const {
  return static_cast<int64_t>(model_.shard().layer_chunks(model_.config()).size());
}

void GptPipelineStage::forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
                               uint64_t dropout_offset, engine::Stream& s) {
  model_.set_batch(chunk, slot, batch_(micro_batch), s);
  model_.forward_chunk(chunk, slot, train, dropout_offset, s);
}

std::vector<double> run_pipeline_step(GptModel& model, const parallel::PipelinePlan& plan,
                                      int stages, int stage, parallel::Comm* pp,
                                      const MicroBatchFns& fns, engine::Stream& s) {
  GptPipelineStage adapter(model, fns.batch);
  return run_pipeline_step(adapter, plan, stages, stage, pp, fns, s);
}

double run_pipeline_forward(GptModel& model, int stages, int stage, parallel::Comm* pp,
                            const GptBatch& batch, engine::Stream& s) {
  GptPipelineStage adapter(model, [&batch](int64_t) { return batch; });
  return run_pipeline_forward(adapter, stages, stage, pp, s);
}

}  // namespace anvil::model
