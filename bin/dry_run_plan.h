// bin/train --dry-run against a stated device memory: plans a GPU job on a machine where no GPU
// is visible (a login node), or for another GPU than the one here. --device-memory takes a size
// (80GiB, 141GB, 81559MiB, a number of bytes) or a GPU's name: h100 and h200, the totals
// nvidia-smi reports for the 80 GB H100 and the 141 GB H200. The plan of one rank fits when its
// total is at most the stated memory (the caller then exits 0; else 1 with this message).
#pragma once

#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "engine/arena.h"
#include "engine/log.h"
#include "engine/status.h"
#include "model/stack/gpt.h"
#include "model/train/precision_config.h"

namespace anvil::bin {

struct DeviceMemory {
  size_t bytes = 0;  // 0: none stated
  std::string what;  // how it was stated, for messages
};

inline constexpr size_t kMiB = size_t{1} << 20;

// The GPU a dry run of a CUDA job assumes when none is visible and none is stated.
inline DeviceMemory default_device_memory() {
  return {81559 * kMiB,
          "an H100 80 GB (81559 MiB) assumed: no GPU is visible and no --device-memory given"};
}

inline absl::StatusOr<DeviceMemory> parse_device_memory(const std::string& text) {
  const std::string v = absl::AsciiStrToLower(text);
  if (v == "h100")
    return DeviceMemory{81559 * kMiB, "--device-memory h100: an H100 80 GB (81559 MiB)"};
  if (v == "h200")
    return DeviceMemory{143771 * kMiB, "--device-memory h200: an H200 141 GB (143771 MiB)"};
  size_t digits = 0;
  while (digits < v.size() &&
         (std::isdigit(static_cast<unsigned char>(v[digits])) || v[digits] == '.')) {
    ++digits;
  }
  const std::string unit = v.substr(digits);
  double number = 0;
  double scale = 0;
  for (const auto& [name, s] : {std::pair<const char*, double>{"", 1},
                                {"b", 1},
                                {"kb", 1e3},
                                {"mb", 1e6},
                                {"gb", 1e9},
                                {"tb", 1e12},
                                {"kib", 0x1p10},
                                {"mib", 0x1p20},
                                {"gib", 0x1p30},
                                {"tib", 0x1p40}}) {
    if (unit == name) scale = s;
  }
  if (digits == 0 || scale == 0 || !absl::SimpleAtod(v.substr(0, digits), &number) ||
      !(number * scale >= 1) || number * scale > 0x1p50) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--device-memory '%s': expected a size from 1 byte to 1 PiB (80GiB, 141GB, 81559MiB, "
        "bytes) or a GPU: h100, h200",
        text.size() > 64 ? text.substr(0, 64) + "..." : text));
  }
  return DeviceMemory{static_cast<size_t>(std::llround(number * scale)), "--device-memory " + text};
}

// The precision a CUDA run of `mode` ([train] precision) would use, without asking for a GPU.
inline absl::StatusOr<model::Precision> planned_cuda_precision(const std::string& mode) {
  model::Precision p;
  p.device = engine::Device::kCuda;
  ANVIL_ASSIGN_OR_RETURN(p.act, model::precision_act_dtype(mode, p.device));
  p.grad = engine::DType::kF32;
  return p;
}

// OK with a "fits" line's text in *line, or ResourceExhausted naming both sizes.
inline absl::Status check_stated_fit(const engine::MemoryPlan& plan, const DeviceMemory& m,
                                     std::string* line) {
  const std::string need = absl::StrFormat(
      "the memory plan of this rank needs %s (%d bytes); the device memory is %s (%d bytes; %s)",
      engine::format_bytes(static_cast<double>(plan.total_bytes())), plan.total_bytes(),
      engine::format_bytes(static_cast<double>(m.bytes)), m.bytes, m.what);
  if (plan.total_bytes() > m.bytes) {
    return absl::ResourceExhaustedError(
        "dry run: does not fit: " + need +
        "; lower [train] micro_batch or [data] seq_len, use a smaller model or more ranks");
  }
  *line = "dry run: fits: " + need;
  return absl::OkStatus();
}

}  // namespace anvil::bin
