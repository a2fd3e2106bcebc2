// File checks shared by bin/preprocess's pipeline (io/preprocess.cc) and the dataset merge
// (io/merge_datasets.cc).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace anvil::io {

// "PATH: cannot ACTION: strerror(err)".
std::string errno_message(const std::string& path, const char* action, int err);

// InvalidArgument when `output` exists and is the file `input` (same device and inode: also
// through a link or another spelling of the path), which writing it would replace.
absl::Status check_not_input(const std::string& input, const std::string& output);

}  // namespace anvil::io
