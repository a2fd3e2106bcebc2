// The tensors of a Hugging Face model directory (save_pretrained's layout): model.safetensors,
// or every shard that model.safetensors.index.json lists. bin/convert import and the T5 parity
// test read HF weights through it; model/checkpoint_hf.h then maps the names.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/host_slice.h"

namespace anvil::io {

// Every tensor, whole, as f32 (F32, F16, BF16 or F64 on disk), named as stored. Errors name
// the file: unreadable, a bad index, a tensor stored twice.
absl::StatusOr<std::vector<engine::HostSlice>> read_hf_tensors(const std::string& hf_dir);

}  // namespace anvil::io
