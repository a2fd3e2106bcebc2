// Fatal checks for CUDA runtime and cuBLASLt calls: print the decoded error with file:line and
// rank, then abort. Sticky CUDA errors cannot be recovered locally, so these never return a
// Status. ANVIL_SYNC_CHECK=1 in the environment (read once by engine) adds a device sync after
// every ANVIL_CUDA_LAUNCH_CHECK so an asynchronous fault is reported at the op that caused it.
// (The binary reads the variable; libraries never read the environment.)
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "engine/status.h"

namespace anvil::engine {

// When enabled (bin/ sets it from ANVIL_SYNC_CHECK=1), every ANVIL_CUDA_LAUNCH_CHECK syncs.
bool sync_check_enabled();
void set_sync_check(bool enabled);

}  // namespace anvil::engine

#define ANVIL_CUDA_CHECK(expr)                                                                \
  do {                                                                                        \
    cudaError_t anvil_err_ = (expr);                                                          \
    if (anvil_err_ != cudaSuccess)                                                            \
      ::anvil::engine::check_failed(                                                          \
          __FILE__, __LINE__, #expr,                                                          \
          std::string(cudaGetErrorName(anvil_err_)) + ": " + cudaGetErrorString(anvil_err_)); \
  } while (0)

#define ANVIL_CUBLAS_CHECK(expr)                                                           \
  do {                                                                                     \
    cublasStatus_t anvil_st_ = (expr);                                                     \
    if (anvil_st_ != CUBLAS_STATUS_SUCCESS)                                                \
      ::anvil::engine::check_failed(__FILE__, __LINE__, #expr,                             \
                                    std::string(cublasLtGetStatusName(anvil_st_)) + ": " + \
                                        cublasLtGetStatusString(anvil_st_));               \
  } while (0)

// After a kernel launch: report launch errors, and with ANVIL_SYNC_CHECK=1 execution errors too.
#define ANVIL_CUDA_LAUNCH_CHECK()                                                         \
  do {                                                                                    \
    ANVIL_CUDA_CHECK(cudaGetLastError());                                                 \
    if (::anvil::engine::sync_check_enabled()) ANVIL_CUDA_CHECK(cudaDeviceSynchronize()); \
  } while (0)
