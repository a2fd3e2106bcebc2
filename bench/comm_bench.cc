// NCCL collective bandwidth at the message sizes a training step uses, one process per GPU:
//   mpirun -np N build/bench/comm_bench [max_mib]
// For each size: all-reduce (sum, f32) and all-gather (bf16 parts) over all ranks, timed with
// CUDA events over 20 iterations after 5 warm-up ones. Reported like nccl-tests:
//   algbw = bytes / time;  busbw = algbw * 2 (N-1)/N (all-reduce), * (N-1)/N (all-gather),
// where bytes is the all-reduce buffer or the whole gathered buffer. Sizes: powers of 4 from
// 1 MiB to max_mib (default 1024): a layer's gradient bucket (tens of MiB for 1.3B) up to the
// whole-model buffers of ZeRO.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/arena.h"
#include "engine/cuda_check.h"
#include "engine/device.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "parallel/nccl_comm.h"

namespace anvil {
namespace {

constexpr int kWarmup = 5, kIters = 20;

// Milliseconds per call of op() on stream s.
template <typename Op>
float time_ms(engine::Stream& s, Op op) {
  for (int i = 0; i < kWarmup; ++i) op();
  auto start = engine::Event::create(), stop = engine::Event::create();
  ANVIL_CHECK_OK(start.status());
  ANVIL_CHECK_OK(stop.status());
  start->record(s);
  for (int i = 0; i < kIters; ++i) op();
  stop->record(s);
  return stop->elapsed_ms_since(*start) / kIters;
}

int run(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int64_t max_mib = argc > 1 ? std::atoll(argv[1]) : 1024;
  if (engine::cuda_device_count() < 1) {
    if (rank == 0) std::printf("comm_bench: no CUDA device\n");
    MPI_Finalize();
    return 0;
  }
  ANVIL_CUDA_CHECK(cudaSetDevice(rank % engine::cuda_device_count()));
  auto grid = parallel::ProcessGrid::create(world, rank, 1, 1);
  ANVIL_CHECK_OK(grid.status());
  parallel::CommOptions opt;
  auto mpi = parallel::MpiComm::create(MPI_COMM_WORLD, grid->world_group(), rank, opt);
  ANVIL_CHECK_OK(mpi.status());
  auto nccl = parallel::NcclComm::create(grid->world_group(), rank, mpi->get(), opt);
  ANVIL_CHECK_OK(nccl.status());
  auto stream = engine::Stream::cuda(rank % engine::cuda_device_count());
  ANVIL_CHECK_OK(stream.status());
  const size_t max_bytes = static_cast<size_t>(max_mib) << 20;
  auto arena = engine::Arena::create(engine::Device::kCuda, max_bytes + (1 << 20), "comm bench");
  ANVIL_CHECK_OK(arena.status());
  const double n = world;
  if (rank == 0) {
    std::printf("%d rank(s)\n%10s %14s %14s %14s %14s\n", world, "MiB", "ar algbw GB/s",
                "ar busbw GB/s", "ag algbw GB/s", "ag busbw GB/s");
  }
  for (int64_t mib = 1; mib <= max_mib; mib *= 4) {
    const int64_t bytes = mib << 20;
    arena->reset(0);
    auto f32 = arena->allocate(engine::DType::kF32, {bytes / 4}, "all-reduce");
    ANVIL_CHECK_OK(f32.status());
    engine::fill_zero(*f32, *stream);
    const float ar =
        time_ms(*stream, [&] { (*nccl)->all_reduce(*f32, parallel::ReduceOp::kSum, *stream); });
    // All-gather: the whole [bytes] bf16 buffer from world equal parts (in place).
    const int64_t part = bytes / 2 / world;
    engine::TensorView whole =
        engine::make_view(f32->data, engine::DType::kBF16, engine::Device::kCuda, {part * world});
    const engine::TensorView mine = engine::slice_rows(whole, rank * part, (rank + 1) * part);
    const float ag = time_ms(*stream, [&] { (*nccl)->all_gather(whole, mine, *stream); });
    const double ar_alg = static_cast<double>(bytes) / (ar * 1e-3) / 1e9;
    const double ag_alg = static_cast<double>(part * world * 2) / (ag * 1e-3) / 1e9;
    if (rank == 0) {
      std::printf("%10lld %14.1f %14.1f %14.1f %14.1f\n", static_cast<long long>(mib), ar_alg,
                  ar_alg * 2 * (n - 1) / n, ag_alg, ag_alg * (n - 1) / n);
    }
  }
  stream->synchronize();
  nccl->reset();
  mpi->reset();
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) { return anvil::run(argc, argv); }
