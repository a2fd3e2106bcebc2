// Error handling: absl::Status propagation macros (Debian's Abseil 20220623 has none of its own)
// and fatal checks for invariants and CUDA/cuBLAS failures inside the step loop. A failed check
// prints the expression, the decoded error, file:line and the process rank, then aborts.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::engine {

// Prints "[anvil rank R] file:line: CHECK failed: what: detail" to stderr and aborts.
[[noreturn]] void check_failed(const char* file, int line, const char* what,
                               const std::string& detail);

// The rank fatal messages name. Set once by a binary's main() after rank discovery (the one
// piece of process-wide state: a fatal error must name its rank without threading context
// through every op).
void set_process_rank(int rank);

}  // namespace anvil::engine

#define ANVIL_STATUS_CONCAT_INNER(a, b) a##b
#define ANVIL_STATUS_CONCAT(a, b) ANVIL_STATUS_CONCAT_INNER(a, b)

#define ANVIL_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status anvil_status_ = (expr);         \
    if (!anvil_status_.ok()) return anvil_status_; \
  } while (0)

#define ANVIL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// ANVIL_ASSIGN_OR_RETURN(auto x, make_x()); returns make_x()'s status on error.
#define ANVIL_ASSIGN_OR_RETURN(lhs, expr) \
  ANVIL_ASSIGN_OR_RETURN_IMPL(ANVIL_STATUS_CONCAT(anvil_statusor_, __LINE__), lhs, expr)

#define ANVIL_CHECK(cond)                                                      \
  do {                                                                         \
    if (!(cond)) ::anvil::engine::check_failed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define ANVIL_CHECK_MSG(cond, msg)                                                \
  do {                                                                            \
    if (!(cond)) ::anvil::engine::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

#define ANVIL_CHECK_OK(expr)                                               \
  do {                                                                     \
    ::absl::Status anvil_status_ = (expr);                                 \
    if (!anvil_status_.ok())                                               \
      ::anvil::engine::check_failed(__FILE__, __LINE__, #expr,             \
                                    std::string(anvil_status_.message())); \
  } while (0)
