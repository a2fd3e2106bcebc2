// Host-scalar reduction over a group (see scalar_reduce.h).
#include "parallel/scalar_reduce.h"

#include "engine/memory.h"
#include "engine/status.h"

namespace anvil::parallel {

double all_reduce_scalar(Comm& comm, double local, ReduceOp op, TensorView scratch,
                         engine::Stream& s) {
  double v = local;
  TensorView host = engine::make_view(&v, engine::DType::kF64, engine::Device::kCpu, {1});
  if (comm.device() == engine::Device::kCpu) {
    comm.all_reduce(host, op, s);
    return v;
  }
  ANVIL_CHECK_MSG(scratch.dtype == engine::DType::kF64 && scratch.numel() == 1,
                  "all_reduce_scalar: scratch must be [1] f64, got " + engine::describe(scratch));
  engine::copy(scratch, host, s);
  comm.all_reduce(scratch, op, s);
  engine::copy(host, scratch, s);
  s.synchronize();
  return v;
}

void sum_host_values(Comm* host, absl::Span<double> v) {
  if (host == nullptr || v.empty()) return;
  ANVIL_CHECK_MSG(host->device() == engine::Device::kCpu,
                  "sum_host_values: the communicator must be a CPU one");
  engine::Stream cpu = engine::Stream::cpu();
  const TensorView t = engine::make_view(v.data(), engine::DType::kF64, engine::Device::kCpu,
                                         {static_cast<int64_t>(v.size())});
  host->all_reduce(t, t, ReduceOp::kSum, cpu);
}

}  // namespace anvil::parallel
