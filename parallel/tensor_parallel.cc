// Megatron's tensor- and sequence-parallel mappings (see tensor_parallel.h).
#include "parallel/tensor_parallel.h"

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"

namespace anvil::parallel {

using engine::TensorView;

TensorView TensorParallel::local_rows(TensorView full) const {
  if (!sp()) return full;
  const int64_t n = full.dim(0) / size;
  return engine::slice_rows(full, rank * n, (rank + 1) * n);
}

uint64_t TensorParallel::row_shift(engine::ConstTensorView local) const {
  return sp() ? static_cast<uint64_t>(rank * local.numel() / 4) : 0;
}

void TensorParallel::all_reduce(TensorView x, engine::Stream& s) const {
  if (size > 1) comm->all_reduce(x, ReduceOp::kSum, s);
}

TensorView TensorParallel::row_parallel_out(TensorView full, engine::Stream& s) const {
  if (!sp()) {
    all_reduce(full, s);
    return full;
  }
  TensorView mine = local_rows(full);
  comm->reduce_scatter(mine, full, ReduceOp::kSum, s);  // in place
  return mine;
}

void TensorParallel::reduce_rows_into(TensorView mine, TensorView full, engine::Stream& s) const {
  if (sp()) {
    comm->reduce_scatter(mine, full, ReduceOp::kSum, s);
    return;
  }
  all_reduce(full, s);
  if (mine.data != full.data) engine::copy(mine, full, s);
}

void TensorParallel::gather_rows(TensorView full, engine::Stream& s) const {
  if (sp()) comm->all_gather(full, local_rows(full), s);  // in place
}

TensorView TensorParallel::gather_grad(TensorView local, engine::Stream& s) const {
  if (!sp()) return local;
  const int64_t rows = local.dim(0) * size;
  ANVIL_CHECK_MSG(
      gather_scratch.ndim == 2 && gather_scratch.dim(0) >= rows &&
          gather_scratch.dim(1) == local.dim(1),
      absl::StrCat("TensorParallel::gather_grad: scratch ", engine::describe(gather_scratch),
                   " cannot hold ", rows, " rows of ", engine::describe(local)));
  const TensorView full = engine::slice_rows(gather_scratch, 0, rows);
  engine::copy(local_rows(full), local, s);
  gather_rows(full, s);
  return full;
}

void TensorParallel::sum_row_grads(std::initializer_list<TensorView> grads,
                                   engine::Stream& s) const {
  if (!sp()) return;
  for (TensorView g : grads) {
    if (!g.empty()) all_reduce(g, s);
  }
}

}  // namespace anvil::parallel
