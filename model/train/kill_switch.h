// [train] kill_switch_path (Megatron-DeepSpeed's --kill-switch-path, megatron/utils.py
// found_kill_switch): a file whose existence stops the run. The fork checks it once after
// initialization (exits at once, nothing saved) and before every iteration (saves a checkpoint,
// then exits); both exits have status 0. Every rank checks the path and the world agrees on the
// maximum, so all ranks stop after the same step.
#pragma once

#include <string>

#include "parallel/comm.h"

namespace anvil::model {

// True on every rank when `path` is set and exists on any rank (collective over `world`; null:
// one rank).
bool kill_switch_found(parallel::Comm* world, const std::string& path);

}  // namespace anvil::model
