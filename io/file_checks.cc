// File checks shared by preprocessing and merging (io/file_checks.h).
#include "io/file_checks.h"

#include <sys/stat.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace anvil::io {

std::string errno_message(const std::string& path, const char* action, int err) {
  return absl::StrCat(path, ": cannot ", action, ": ", std::strerror(err));
}

absl::Status check_not_input(const std::string& input, const std::string& output) {
  struct stat in, out;
  if (input == "-" || ::stat(input.c_str(), &in) != 0 || ::stat(output.c_str(), &out) != 0) {
    return absl::OkStatus();
  }
  if (in.st_dev != out.st_dev || in.st_ino != out.st_ino) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the input ", input, " is the output ", output,
                   ", which would be overwritten; choose another --output-prefix"));
}

}  // namespace anvil::io
