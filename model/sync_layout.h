// The model side of parallel::GradSync (parallel/grad_sync.h), shared by GPT and T5: a
// ParamTable's buckets as SyncBuckets, the flat buffers a ZeRO stage needs carved from the
// model's arenas (or recorded in its memory plan), and the parameter views bound to them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/dtype.h"
#include "model/carver.h"
#include "model/param_table.h"
#include "model/run_options.h"
#include "parallel/grad_sync.h"
#include "parallel/offload_optimizer.h"

namespace anvil::model {

// The table's buckets in order; is_layer(name) marks a layer's bucket (gathered and reduced per
// layer at ZeRO 2, 3), the others stay whole (embeddings, final norms).
std::vector<parallel::SyncBucket> sync_buckets(
    const ParamTable& t, const std::function<bool(const std::string&)>& is_layer);

// Carves layout's buffers (categories "params", "master", "optimizer", "grads"): the compute
// copy in act, the rest in grad dtype; master is value when the two dtypes are equal. With
// offload (optimizer offload: parallel/offload_optimizer.h owns them in host memory) master, m
// and v are left empty for the caller to point at the host state.
parallel::SyncBuffers carve_sync_buffers(const parallel::SyncLayout& layout, engine::DType act,
                                         engine::DType grad, Carver& carver, bool offload = false);

// Points every parameter's views at the buffers holding it whole (value, master, grad, m, v
// where [flat_numel]; the persistent buckets' values and gradients in persist_* at stages 2,
// 3); the rest stay empty (a layer's views come from GradSync's BindLayer).
void bind_sync_buffers(ParamTable& t, const parallel::SyncBuffers& b,
                       const parallel::SyncLayout& layout);

// Optimizer offload (parallel/offload_optimizer.h): the host state of the layout's optimizer
// elements (f32 master, AdamW m and v, staging for gradients and the compute copy in prec.act),
// with b's master, m and v pointed at it and t's views bound again. The device keeps no master,
// m or v (carve_sync_buffers with offload). threads: the host AdamW's (0: all).
absl::StatusOr<std::unique_ptr<parallel::OffloadOptimizer>> attach_offload(
    ParamTable& t, parallel::SyncBuffers& b, const parallel::SyncLayout& layout,
    const Precision& prec, int threads);

}  // namespace anvil::model
