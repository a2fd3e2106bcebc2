// Parameter initialization that every model shares: ops::init_normal draws an element's value
// from (seed, its flat offset in the whole single-rank model), so a parameter's elements are
// written where they live (a flat buffer, or this rank's ZeRO pieces), and a TP shard gets the
// whole model's values at its global elements. What each parameter draws (kind, sigma, offset)
// is the family's (GPT-2's: model/stack/gpt_init.h; T5's: model/t5/t5.cc).
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "model/param_table.h"
#include "ops/init_normal.h"
#include "parallel/zero.h"

namespace anvil::model {

// Where initial values go: a flat buffer holding every element [flat_numel], or (part set) a
// ZeRO shard [flat_numel / dp] holding this rank's pieces.
struct InitTarget {
  engine::TensorView buf;
  const parallel::ZeroPartition* part = nullptr;
};

// The TP split of parameter p's shard on TP rank tp_rank of tp (ops::tp_whole_index then gives
// model::tp_global_index).
ops::TpSplit tp_split(const Param& p, int tp, int tp_rank);

// Elements [first, first + count) of parameter p (first counted from p's start) drawn with
// `args` (args.first is set here) into target t: at their flat positions, or (t.part) those
// inside this rank's ZeRO pieces at their shard offsets.
void init_range(const InitTarget& t, const Param& p, int64_t first, int64_t count,
                ops::InitNormalArgs args, engine::Stream& stream);

}  // namespace anvil::model
