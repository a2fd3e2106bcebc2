// parallel/tensor_parallel.h on the CPU under mpirun (np 1, 2, 4), TP over the whole world, with
// and without sequence parallelism: which rows a rank holds and their Philox shift, the
// row-parallel sum (all-reduce or reduce-scatter, in place), the out-of-place reduction of the
// embedding, the all-gathers of rows and of gradient rows, and the sums of norm gradients, each
// against the closed form of rank-dependent inputs (x_r[i] = r + 1 + i / 8, f64).
#include "parallel/tensor_parallel.h"

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/memory.h"
#include "engine/stream.h"
#include "gtest/gtest.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/mpi_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::parallel {
namespace {

using engine::DType;
using engine::TensorView;

constexpr int64_t kRows = 8, kCols = 4;  // rows divisible by every world size here

struct Fixture {
  int size = 1, rank = 0;
  std::unique_ptr<GroupComms> comms;
  std::vector<double> full, scratch;  // [kRows, kCols] each
  engine::Stream s = engine::Stream::cpu();

  explicit Fixture(bool sp) {
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto grid = ProcessGrid::create(size, rank, size, 1, 1);
    EXPECT_TRUE(grid.ok()) << grid.status();
    auto c = create_mpi_group_comms(*grid, {});
    EXPECT_TRUE(c.ok()) << c.status();
    comms = std::make_unique<GroupComms>(std::move(*c));
    full.resize(kRows * kCols);
    scratch.resize(kRows * kCols);
    tp = {comms->tp.get(), size, rank, sp, view(scratch)};
  }
  TensorView view(std::vector<double>& v) {
    return engine::make_view(v.data(), DType::kF64, engine::Device::kCpu, {kRows, kCols});
  }
  // full = this rank's x_r.
  void fill() {
    for (size_t i = 0; i < full.size(); ++i) full[i] = rank + 1 + static_cast<double>(i) / 8;
  }
  // Element i of the sum over ranks of x_r.
  double sum_at(int64_t i) const {
    return size * (size + 1) / 2.0 + size * static_cast<double>(i) / 8;
  }
  TensorParallel tp;
};

void check_mappings(bool sp) {
  Fixture f(sp);
  const bool split = sp && f.size > 1;
  const int64_t rows = split ? kRows / f.size : kRows, r0 = split ? f.rank * rows : 0;
  EXPECT_EQ(f.tp.local_rows(kRows), rows);
  const TensorView mine = f.tp.local_rows(f.view(f.full));
  EXPECT_EQ(mine.dim(0), rows);
  EXPECT_EQ(mine.data, f.full.data() + r0 * kCols);
  EXPECT_EQ(f.tp.row_shift(mine), static_cast<uint64_t>(r0 * kCols / 4));

  // g forward: the sum over TP as this rank's rows.
  f.fill();
  const TensorView out = f.tp.row_parallel_out(f.view(f.full), f.s);
  ASSERT_EQ(out.dim(0), rows);
  for (int64_t i = 0; i < rows * kCols; ++i) {
    EXPECT_DOUBLE_EQ(out.as<double>()[i], f.sum_at(r0 * kCols + i)) << i;
  }
  // The embedding's out-of-place reduction into this rank's rows (rows of `mine` when split).
  f.fill();
  std::vector<double> own(static_cast<size_t>(rows * kCols));
  const TensorView dst =
      split ? engine::make_view(own.data(), DType::kF64, engine::Device::kCpu, {rows, kCols})
            : f.view(f.full);
  f.tp.reduce_rows_into(dst, f.view(f.full), f.s);
  for (int64_t i = 0; i < rows * kCols; ++i) {
    EXPECT_DOUBLE_EQ(dst.as<double>()[i], f.sum_at(r0 * kCols + i)) << i;
  }

  // f forward: every rank's rows (own rows = this rank's x_r) gathered in place.
  f.fill();
  f.tp.gather_rows(f.view(f.full), f.s);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    const int64_t owner = split ? i / (rows * kCols) : f.rank;
    EXPECT_DOUBLE_EQ(f.full[static_cast<size_t>(i)], owner + 1 + static_cast<double>(i) / 8);
  }
  // g backward: a [rows, d] gradient as [kRows, d] (into the scratch when split).
  f.fill();
  const TensorView g = f.tp.gather_grad(f.tp.local_rows(f.view(f.full)), f.s);
  ASSERT_EQ(g.dim(0), kRows);
  EXPECT_EQ(g.data, split ? static_cast<void*>(f.scratch.data()) : f.full.data());
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    const int64_t owner = split ? i / (rows * kCols) : f.rank;
    EXPECT_DOUBLE_EQ(g.as<double>()[i], owner + 1 + static_cast<double>(i) / 8);
  }

  // Norm gradients: summed over TP only when split.
  f.fill();
  f.tp.sum_row_grads({f.view(f.full), TensorView{}}, f.s);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    EXPECT_DOUBLE_EQ(f.full[static_cast<size_t>(i)],
                     split ? f.sum_at(i) : f.rank + 1 + static_cast<double>(i) / 8);
  }
}

TEST(TensorParallel, MappingsWithoutSequenceParallelism) { check_mappings(false); }
TEST(TensorParallel, MappingsWithSequenceParallelism) { check_mappings(true); }

}  // namespace
}  // namespace anvil::parallel
