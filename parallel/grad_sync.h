// Gradient synchronization over the data-parallel group (DESIGN.md §5): the one place a
// model's gradients are reduced and its sharded parameters gathered, for a model whose flat
// parameter buffers [n] are a sequence of buckets (one per layer, plus "persistent" ones: the
// embeddings, the final norm).
//   stage 0 (plain DP): every rank holds everything; after a step's backward the gradient is
//     summed over DP (= in place) by bucketed all-reduces (parallel/data_parallel.h), each
//     layer's bucket started as soon as its backward is done when overlap is on.
//   stages 1-3 (ZeRO, parallel/zero.h): the optimizer state is sharded; 2: gradients too, each
//     layer's summed into this rank's pieces (+=) right after its backward; 3: parameters too,
//     each layer all-gathered into one of two buffers before use, the next layer prefetched into
//     the other (CUDA: on a side stream, ordered by events; CPU: at once).
// The model supplies its buckets, which bucket each layer uses, a callback that points a
// layer's value or gradient views at a flat bucket range, and the stream of each call; it calls
// the layer hooks in pass order and the step functions once per step. Gradients accumulate
// (+=) over a step's micro-batches wherever they are kept.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "ops/adamw.h"
#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/offload_optimizer.h"
#include "parallel/zero.h"

namespace anvil::parallel {

// A flat range [begin, end) of the parameter buffers, [begin, decay_end) with weight decay.
// layer: a layer's parameters (gathered for each use at stage 3, its gradients reduced after
// each backward at stages 2, 3); the other buckets stay whole on every rank.
struct SyncBucket {
  int64_t begin = 0, decay_end = 0, end = 0;
  bool layer = false;
};

// Element counts of the buffers a stage needs (see SyncBuffers).
struct SyncLayout {
  int stage = 0, dp = 1;
  int64_t numel = 0;                    // flat elements
  int64_t state_numel = 0;              // optimizer state: numel / dp with ZeRO, else numel
  int64_t persist_numel = 0;            // the persistent buckets back to back (stages 2, 3)
  int64_t layer_max = 0;                // the largest layer bucket (stages 2, 3)
  std::vector<int64_t> persist_offset;  // per bucket: offset in persist_*, -1 for a layer
};
SyncLayout sync_layout(const std::vector<SyncBucket>& buckets, int stage, int dp);

// The buffers, carved by the model from its arenas (empty where the stage needs none).
struct SyncBuffers {
  engine::TensorView value;          // [numel] compute copy; stage 3: [state_numel] own pieces
  engine::TensorView master;         // [state_numel] f32 (the same memory as value when equal)
  engine::TensorView m, v;           // [state_numel] f32 AdamW moments
  engine::TensorView grad;           // [numel] f32 (stages 0, 1)
  engine::TensorView grad_shard;     // [state_numel] f32 reduced own pieces (ZeRO)
  engine::TensorView persist_value;  // [persist_numel] act (stage 3)
  engine::TensorView persist_grad;   // [persist_numel] f32 (stages 2, 3)
  engine::TensorView grad_scratch;   // [layer_max] f32: one layer's gradients (stages 2, 3)
  engine::TensorView grad_piece;     // [layer_max / dp] f32: its reduced piece (stages 2, 3)
  engine::TensorView gather;         // [2, layer_max] act: gathered layers (stage 3)
};

struct GradSyncOptions {
  int stage = 0;                // 0: plain DP, 1-3: ZeRO
  Comm* dp = nullptr;           // the DP group (not owned); null: no reduction (stage 0)
  int64_t dp_bucket_elems = 0;  // stage 0: elements per all-reduce (0: one)
  int cuda_device = 0;          // for the side streams (CUDA)
  // Optimizer offload (stages 0-2; not owned): master, m and v are its host views and
  // optimizer_step runs its host AdamW on the reduced gradients (grad at stage 0, grad_shard
  // under ZeRO), writing the compute copy back, before the ZeRO all-gathers.
  OffloadOptimizer* offload = nullptr;
};

enum class LayerPart { kValues, kGrads };
enum class PassDirection { kForward, kBackward };

class GradSync {
 public:
  // Points layer `layer`'s value or gradient views at `bucket`, a flat view of its bucket's
  // elements (the gathered parameters, or zeroed gradient scratch).
  using BindLayer = std::function<void(int64_t layer, LayerPart part, engine::TensorView bucket)>;

  // layer_bucket[l]: the bucket of local layer l; layer_chain[l]: its chain (a model chunk):
  // a prefetch never crosses chains. InvalidArgument for buckets ZeroPartition rejects, a
  // missing DP group at stages 1-3, buffers not of sync_layout(buckets, stage, DP size), or
  // gradients DataParallel rejects.
  static absl::StatusOr<std::unique_ptr<GradSync>> create(std::vector<SyncBucket> buckets,
                                                          std::vector<int64_t> layer_bucket,
                                                          std::vector<int64_t> layer_chain,
                                                          const SyncBuffers& buffers,
                                                          const GradSyncOptions& options,
                                                          BindLayer bind);
  ~GradSync();

  int stage() const { return options_.stage; }
  const ZeroPartition* partition() const { return zero_ ? &*zero_ : nullptr; }
  const SyncBuffers& buffers() const { return buf_; }

  // Layer hooks. start_pass sets the prefetch direction (forward: next layer, backward:
  // previous). gather_layer (before a layer's forward or backward, stage 3) binds its gathered
  // values; zero_layer_grads (before its backward, stages 2, 3) binds zeroed scratch as its
  // gradients; layer_grads_done (after its backward) sums the scratch over DP into the own
  // pieces (stages 2, 3), or with overlap on (stage 0) starts the bucket's all-reduce.
  void start_pass(PassDirection d) { dir_ = d == PassDirection::kForward ? 1 : -1; }
  void gather_layer(int64_t layer, engine::Stream& s);
  void zero_layer_grads(int64_t layer, engine::Stream& s);
  void layer_grads_done(int64_t layer, engine::Stream& s);
  // Stage 0: whether layer_grads_done starts all-reduces (a step's last micro-batch only: the
  // gradient of the bucket must be final).
  void set_overlap(bool on) { overlap_ = on; }

  // Step functions. zero_grads: every gradient buffer = 0. reduce_gradients (after the step's
  // last backward): stage 0 sums the rest of the gradient over DP, ZeRO reduce-scatters the
  // buckets still whole (stage 1: all; 2, 3: the persistent ones) into the own pieces.
  void zero_grads(engine::Stream& s);
  void reduce_gradients(engine::Stream& s);
  // out [1] += the squares of the reduced gradient's flat elements [lo, hi) held here (the own
  // pieces under ZeRO: sum over DP next). ws: sum_squares' workspace.
  void add_grad_squares(engine::TensorView out, int64_t lo, int64_t hi, engine::Workspace ws,
                        engine::Stream& s) const;
  // AdamW on the elements this rank updates (args.weight_decay on the decay ranges, 0 on the
  // rest; on the host with options.offload), then the parameters handed back: stages 1, 2
  // all-gather every bucket into value, stage 3 the persistent ones (the layers are gathered on
  // use).
  void optimizer_step(const ops::AdamWArgs& args, engine::Stream& s);
  // After the caller overwrote this rank's values (a checkpoint load): stage 3 gathers the
  // persistent buckets again.
  void params_loaded(engine::Stream& s);
  // out [numel] (=, act dtype): every value whole (stage 3 all-gathers: a collective).
  void gather_values(engine::TensorView out, engine::Stream& s);

 private:
  GradSync() = default;
  absl::Status setup_prefetch();
  size_t bucket_of(int64_t layer) const {
    return static_cast<size_t>(layer_bucket_[static_cast<size_t>(layer)]);
  }
  engine::TensorView gather_slot(int slot, int64_t layer) const;
  void gather_into(int slot, int64_t layer, engine::Stream& on);
  void gather_persistent(engine::Stream& s);
  void forget_gathered(engine::Stream& s);

  std::vector<SyncBucket> buckets_;
  std::vector<int64_t> layer_bucket_, layer_chain_;
  SyncLayout layout_;
  SyncBuffers buf_;
  GradSyncOptions options_;
  BindLayer bind_;
  std::optional<ZeroPartition> zero_;    // stages 1-3
  std::unique_ptr<DataParallel> plain_;  // stage 0 with a DP group
  bool overlap_ = false;
  // Stage 3: the layer each gather buffer holds (-1: none); CUDA: whether a prefetch into it
  // may still run, the events after each prefetch and before it.
  int64_t slot_layer_[2] = {-1, -1};
  bool slot_pending_[2] = {false, false};
  int dir_ = 1;
  std::unique_ptr<engine::Stream> side_;
  std::vector<engine::Event> slot_ready_;
  std::unique_ptr<engine::Event> compute_mark_;
};

}  // namespace anvil::parallel
