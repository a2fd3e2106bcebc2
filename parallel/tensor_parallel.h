// Megatron's tensor-parallel mappings over one TP group, with sequence parallelism as an option
// (DESIGN.md §5), shared by every model. A model's [rows, d] residual stream is either whole on
// every TP rank (sp() false) or split by rows: rank r holds rows [r R/tp, (r+1) R/tp) of the R
// rows (sp() true), and so do its norms and hidden dropouts. The conjugate pairs around a
// column-parallel linear (input replicated, local output columns) followed by a row-parallel one
// (local input columns, output partial over TP):
//   f (before column-parallel): forward gather_rows (all-gather; identity without sp()),
//                               backward col_parallel_in_grad (reduce-scatter or all-reduce)
//   g (after row-parallel):     forward row_parallel_out (reduce-scatter or all-reduce),
//                               backward gather_grad (all-gather; identity without sp())
// Every collective runs in place on the caller's views (parallel/comm.h conventions); nothing
// here allocates. Without TP (size 1) every mapping is the identity.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "parallel/comm.h"

namespace anvil::parallel {

struct TensorParallel {
  Comm* comm = nullptr;  // the TP group (not owned); null when size == 1
  int size = 1, rank = 0;
  bool sequence_parallel = false;
  // [max rows, d] scratch that gather_grad collects a gradient's rows into (sp() only).
  engine::TensorView gather_scratch;

  bool sp() const { return sequence_parallel && size > 1; }
  // Rows this rank holds of a tensor of `total` rows.
  int64_t local_rows(int64_t total) const { return sp() ? total / size : total; }
  // This rank's rows of `full` [R, ...] (full itself without sp()).
  engine::TensorView local_rows(engine::TensorView full) const;
  // Philox offset of this rank's first element in the whole [R, cols] tensor whose rows
  // `local` holds, for dropout on local rows numbered as on one rank (element i of a tensor is
  // counter i / 4: (R / tp) * cols must be a multiple of 4). 0 without sp().
  uint64_t row_shift(engine::ConstTensorView local) const;

  // x = sum of x over TP, in place (no-op without TP).
  void all_reduce(engine::TensorView x, engine::Stream& s) const;
  // g forward: `full` [R, d] holds a row-parallel linear's partial sum; returns the sum over TP
  // as the rows this rank holds (all-reduce in place, or with sp() reduce-scatter into
  // local_rows(full)).
  engine::TensorView row_parallel_out(engine::TensorView full, engine::Stream& s) const;
  // f backward: `full` holds a column-parallel linear's input gradient (partial over TP).
  engine::TensorView col_parallel_in_grad(engine::TensorView full, engine::Stream& s) const {
    return row_parallel_out(full, s);
  }
  // `mine` [R / tp, d] = this rank's rows of the sum over TP of `full` [R, d] (out of place;
  // without sp() mine must be [R, d] and may alias full).
  void reduce_rows_into(engine::TensorView mine, engine::TensorView full, engine::Stream& s) const;
  // f forward with sp(): `full` [R, d] whose own rows are written receives every rank's rows.
  void gather_rows(engine::TensorView full, engine::Stream& s) const;
  // g backward: a [R / tp, d] gradient as [R, d], all-gathered into gather_scratch with sp();
  // `local` itself without.
  engine::TensorView gather_grad(engine::TensorView local, engine::Stream& s) const;
  // sp(): the gradients of parameters applied to local rows only (norm weights), each partial
  // over TP, summed over TP in place (empty views skipped). No-op without sp().
  void sum_row_grads(std::initializer_list<engine::TensorView> grads, engine::Stream& s) const;
};

}  // namespace anvil::parallel
