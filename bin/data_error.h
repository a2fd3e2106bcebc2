// How bin/'s sample streams stop on a sample that cannot be read: a .bin truncated or rewritten
// under the running job (DataLoss from io/indexed_dataset.h). The streams run inside a training
// step (model::SampleFn returns nothing), where the run cannot continue without the sample; the
// libraries return the error and the program ends here, as a data error found before training
// does: the message and exit status 1, no abort and no core dump.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace anvil::bin {

inline void stop_unless_ok(const absl::Status& st, const std::string& what) {
  if (st.ok()) return;
  std::fflush(stdout);
  std::fprintf(stderr, "anvil: error: %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace anvil::bin
