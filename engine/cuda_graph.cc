// Stream capture into an instantiated CUDA graph (see cuda_graph.h).
#include "engine/cuda_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda_check.h"

namespace anvil::engine {
namespace {

absl::Status capture_error(const char* what, cudaError_t err) {
  (void)cudaGetLastError();
  return absl::FailedPreconditionError(absl::StrCat("CUDA graph capture: ", what,
                                                    " failed: ", cudaGetErrorName(err), ": ",
                                                    cudaGetErrorString(err)));
}

}  // namespace

absl::StatusOr<CudaGraph> CudaGraph::capture(const Stream& s, const std::function<void()>& body) {
  if (!s.is_cuda()) return absl::InvalidArgumentError("CUDA graph capture needs a CUDA stream");
  // Relaxed: the body may call host-side CUDA APIs (cudaFuncSetAttribute on a first launch)
  // that the stricter modes forbid while a capture is running.
  cudaError_t err = cudaStreamBeginCapture(s.cuda_stream(), cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) return capture_error("cudaStreamBeginCapture", err);
  body();
  CudaGraph g;
  err = cudaStreamEndCapture(s.cuda_stream(), &g.graph_);
  if (err != cudaSuccess) return capture_error("the recorded work (cudaStreamEndCapture)", err);
  err = cudaGraphGetNodes(g.graph_, nullptr, &g.nodes_);
  if (err != cudaSuccess) return capture_error("cudaGraphGetNodes", err);
  err = cudaGraphInstantiate(&g.exec_, g.graph_, 0);
  if (err != cudaSuccess) return capture_error("cudaGraphInstantiate", err);
  return g;
}

CudaGraph::CudaGraph(CudaGraph&& o) noexcept { *this = std::move(o); }

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    release();
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
    nodes_ = std::exchange(o.nodes_, 0);
  }
  return *this;
}

CudaGraph::~CudaGraph() { release(); }

void CudaGraph::release() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

void CudaGraph::launch(const Stream& s) const {
  ANVIL_CUDA_CHECK(cudaGraphLaunch(exec_, s.cuda_stream()));
}

}  // namespace anvil::engine
