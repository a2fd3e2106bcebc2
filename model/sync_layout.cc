// ParamTable buckets, buffers and views for parallel::GradSync (see sync_layout.h).
#include "model/sync_layout.h"

#include "engine/cuda_check.h"
#include "engine/status.h"

namespace anvil::model {

using engine::TensorView;

std::vector<parallel::SyncBucket> sync_buckets(
    const ParamTable& t, const std::function<bool(const std::string&)>& is_layer) {
  std::vector<parallel::SyncBucket> out;
  for (const ParamTable::Bucket& k : t.buckets()) {
    out.push_back({k.begin, k.decay_end, k.end, is_layer(k.name)});
  }
  return out;
}

parallel::SyncBuffers carve_sync_buffers(const parallel::SyncLayout& l, engine::DType act,
                                         engine::DType grad, Carver& carver, bool offload) {
  const int z = l.stage;
  const int64_t n = l.numel, no = l.state_numel;
  parallel::SyncBuffers b;
  b.value =
      carver.take("params", z == 3 ? "params (compute copy, own shard)" : "params (compute copy)",
                  act, {z == 3 ? no : n});
  if (!offload) {
    b.master = act == grad ? b.value : carver.take("master", "master weights", grad, {no});
    b.m = carver.take("optimizer", "adamw m", grad, {no});
    b.v = carver.take("optimizer", "adamw v", grad, {no});
  }
  if (z < 2) b.grad = carver.take("grads", "gradients", grad, {n});
  if (z > 0) b.grad_shard = carver.take("grads", "gradients (own shard, reduced)", grad, {no});
  if (z >= 2) {
    b.persist_grad =
        carver.take("grads", "gradients (embeddings, final norms)", grad, {l.persist_numel});
    b.grad_scratch = carver.take("grads", "gradients (one layer)", grad, {l.layer_max});
    b.grad_piece =
        carver.take("grads", "gradients (one layer, own piece)", grad, {l.layer_max / l.dp});
  }
  if (z == 3) {
    b.persist_value =
        carver.take("params", "params (embeddings, final norms)", act, {l.persist_numel});
    b.gather = carver.take("params", "params (gathered layers)", act, {2, l.layer_max});
  }
  return b;
}

void bind_sync_buffers(ParamTable& t, const parallel::SyncBuffers& b,
                       const parallel::SyncLayout& l) {
  const int64_t n = t.flat_numel();
  auto whole = [&](TensorView v) { return v.numel() == n ? v : TensorView{}; };
  t.bind(whole(b.value), b.master.data == b.value.data ? whole(b.value) : whole(b.master), b.grad,
         whole(b.m), whole(b.v));
  // ZeRO 2/3: the persistent buckets' gradients (and values) live in persist_*.
  const std::vector<ParamTable::Bucket>& buckets = t.buckets();
  for (Param& p : t.all()) {
    for (size_t i = 0; i < buckets.size(); ++i) {
      const int64_t base = l.persist_offset[i];
      if (p.offset < buckets[i].begin || p.offset >= buckets[i].end || base < 0) continue;
      const int64_t at = base + p.offset - buckets[i].begin;
      if (!b.persist_grad.empty()) p.grad = flat_slice(b.persist_grad, at, p.shape);
      if (!b.persist_value.empty()) p.value = flat_slice(b.persist_value, at, p.shape);
    }
  }
}

absl::StatusOr<std::unique_ptr<parallel::OffloadOptimizer>> attach_offload(
    ParamTable& t, parallel::SyncBuffers& b, const parallel::SyncLayout& layout,
    const Precision& prec, int threads) {
  int cuda_device = 0;
  if (prec.device == engine::Device::kCuda) ANVIL_CUDA_CHECK(cudaGetDevice(&cuda_device));
  parallel::OffloadOptions options;
  options.threads = threads;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<parallel::OffloadOptimizer> offload,
                         parallel::OffloadOptimizer::create(layout.state_numel, prec.act,
                                                            prec.device, cuda_device, options));
  b.master = offload->master();
  b.m = offload->m();
  b.v = offload->v();
  bind_sync_buffers(t, b, layout);
  return offload;
}

}  // namespace anvil::model
