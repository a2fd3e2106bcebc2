// Optimizer offload: host state, chunked device->host gradient copies, the host AdamW and the
// host->device parameter copies, overlapped on CUDA (scheme in parallel/offload_optimizer.h).
#include "parallel/offload_optimizer.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "ops/host_adamw.h"

namespace anvil::parallel {
namespace {

using engine::ConstTensorView;
using engine::DType;
using engine::TensorView;

TensorView piece(TensorView flat, int64_t begin, int64_t n) {
  return engine::slice_rows(flat, begin, begin + n);
}
ConstTensorView piece(ConstTensorView flat, int64_t begin, int64_t n) {
  return engine::slice_rows(flat, begin, begin + n);
}

// The ranges cut into chunks of at most `chunk` elements.
std::vector<OffloadRange> chunks_of(const std::vector<OffloadRange>& ranges, int64_t chunk) {
  std::vector<OffloadRange> out;
  for (const OffloadRange& r : ranges) {
    for (int64_t at = 0; at < r.numel; at += chunk) {
      const int64_t n = std::min(chunk, r.numel - at);
      out.push_back({r.state_begin + at, r.value_begin + at, n, r.decay});
    }
  }
  return out;
}

}  // namespace

size_t OffloadOptimizer::host_bytes(int64_t numel, DType param_dtype) {
  const std::vector<int64_t> shape{numel};
  return 4 * engine::arena_bytes(DType::kF32, shape) + engine::arena_bytes(param_dtype, shape);
}

absl::StatusOr<std::unique_ptr<OffloadOptimizer>> OffloadOptimizer::create(int64_t numel,
                                                                           DType param_dtype,
                                                                           engine::Device device,
                                                                           int cuda_device,
                                                                           OffloadOptions options) {
  if (numel < 0) return absl::InvalidArgumentError(absl::StrCat("offload: numel ", numel, " < 0"));
  if (param_dtype != DType::kF32 && param_dtype != DType::kBF16 && param_dtype != DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload: the compute copy must be f32, bf16 or f16, got ",
                     std::string(engine::dtype_name(param_dtype))));
  }
  if (options.chunk_elems < 1 || options.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offload: chunk_elems must be >= 1 (got ",
                                                   options.chunk_elems, ") and threads >= 0 (got ",
                                                   options.threads, ")"));
  }
  std::unique_ptr<OffloadOptimizer> o(new OffloadOptimizer());
  const size_t bytes = host_bytes(numel, param_dtype);
  const bool cuda = device == engine::Device::kCuda;
  absl::StatusOr<engine::Arena> arena =
      cuda ? engine::Arena::create_pinned_host(bytes, "offloaded optimizer (pinned host)")
           : engine::Arena::create(engine::Device::kCpu, bytes, "offloaded optimizer (host)");
  if (!arena.ok()) return arena.status();
  o->arena_ = std::move(*arena);
  auto take = [&](DType d, const char* what) -> absl::StatusOr<TensorView> {
    return o->arena_.allocate(d, {numel}, what);
  };
  for (auto [dst, what] : {std::pair<TensorView*, const char*>{&o->master_, "master weights"},
                           {&o->m_, "adamw m"},
                           {&o->v_, "adamw v"},
                           {&o->grad_host_, "gradients (host staging)"}}) {
    absl::StatusOr<TensorView> t = take(DType::kF32, what);
    if (!t.ok()) return t.status();
    *dst = *t;
  }
  absl::StatusOr<TensorView> p = take(param_dtype, "params (host staging)");
  if (!p.ok()) return p.status();
  o->param_host_ = *p;
  const unsigned hw = std::thread::hardware_concurrency();
  o->threads_ = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, hw));
  o->chunk_elems_ = options.chunk_elems;
  if (cuda) {
    absl::StatusOr<engine::Stream> side = engine::Stream::cuda(cuda_device);
    if (!side.ok()) return side.status();
    o->side_ = std::make_unique<engine::Stream>(std::move(*side));
    absl::StatusOr<engine::Event> done = engine::Event::create();
    if (!done.ok()) return done.status();
    o->params_done_ = std::make_unique<engine::Event>(std::move(*done));
  }
  return o;
}

void OffloadOptimizer::step(const ops::AdamWArgs& args, const std::vector<OffloadRange>& ranges,
                            ConstTensorView grad, TensorView value, engine::Stream& s) {
  const int64_t n = master_.numel();
  ANVIL_CHECK_MSG(grad.numel() == n && grad.dtype == DType::kF32 && grad.device == s.device(),
                  absl::StrCat("offload step: grad must be f32 [", n,
                               "] on the stream's device, got ", engine::describe(grad)));
  ANVIL_CHECK_MSG(value.empty() || (value.dtype == param_host_.dtype && value.device == s.device()),
                  absl::StrCat("offload step: value must be empty or ",
                               std::string(engine::dtype_name(param_host_.dtype)),
                               " on the stream's device, got ", engine::describe(value)));
  for (const OffloadRange& r : ranges) {
    const bool ok =
        r.numel >= 0 && r.state_begin >= 0 && r.state_begin + r.numel <= n &&
        (value.empty() || (r.value_begin >= 0 && r.value_begin + r.numel <= value.numel()));
    ANVIL_CHECK_MSG(
        ok, absl::StrCat("offload step: range of ", r.numel, " elements at state ", r.state_begin,
                         " / value ", r.value_begin, " is outside the state [", n,
                         "] or the value [", value.numel(), "]"));
  }
  const std::vector<OffloadRange> chunks = chunks_of(ranges, chunk_elems_);
  const bool cuda = s.is_cuda();
  if (cuda) {
    while (grad_ready_.size() < chunks.size()) {
      absl::StatusOr<engine::Event> e = engine::Event::create();
      ANVIL_CHECK_OK(e.status());
      grad_ready_.push_back(std::move(*e));
    }
    // All gradient copies at once, in order, on the caller's stream (after the reduction).
    for (size_t k = 0; k < chunks.size(); ++k) {
      const OffloadRange& c = chunks[k];
      engine::copy(piece(grad_host_, c.state_begin, c.numel), piece(grad, c.state_begin, c.numel),
                   s);
      grad_ready_[k].record(s);
    }
    // The side stream's parameter copies must not overwrite values still read by earlier work.
    params_done_->record(s);
    params_done_->wait(*side_);
  }
  for (size_t k = 0; k < chunks.size(); ++k) {
    const OffloadRange& c = chunks[k];
    TensorView g_host = piece(grad_host_, c.state_begin, c.numel);
    if (cuda) {
      grad_ready_[k].synchronize();
    } else {
      engine::copy(g_host, piece(grad, c.state_begin, c.numel), s);
    }
    ops::AdamWArgs a = args;
    if (!c.decay) a.weight_decay = 0.0f;
    TensorView p_host = value.empty() ? TensorView{} : piece(param_host_, c.state_begin, c.numel);
    ops::host_adamw_update(a, piece(master_, c.state_begin, c.numel),
                           piece(m_, c.state_begin, c.numel), piece(v_, c.state_begin, c.numel),
                           p_host, g_host, threads_);
    if (!value.empty()) {
      engine::copy(piece(value, c.value_begin, c.numel), p_host, cuda ? *side_ : s);
    }
  }
  if (cuda) {
    params_done_->record(*side_);
    params_done_->wait(s);
  }
}

}  // namespace anvil::parallel
