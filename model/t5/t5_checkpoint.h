// What a T5 rank puts into a checkpoint and takes out of one: model/train/checkpoint.h's format and
// code (logical tensors "master/<name>", "exp_avg/<name>", "exp_avg_sq/<name>", boxes of the
// whole tensors, each element written by one rank), over T5Model's parameter table. Names are
// model/t5/t5.h's (HF T5 names, with the fused SelfAttention.qkv, EncDecAttention.kv and, v1.1,
// DenseReluDense.wi = [wi_0; wi_1]); shared.weight and lm_head.weight without the padding rows.
// Saving: each pipeline stage its own parameters, a parameter several stages hold (the shared
// embedding: first encoder stage, first decoder stage and, tied, the last stage; a relative
// table: every stage of its stack) by the first of them (T5Model::first_copy); TP-replicated
// parameters (norms, relative tables) by TP rank 0, DP replicas by DP rank 0, under ZeRO each
// DP rank its own pieces. Loading sets every copy and works from any (tp, pp, pp_split_rank,
// dp, zero_stage).
#pragma once

#include "absl/status/status.h"
#include "engine/host_slice.h"
#include "engine/stream.h"
#include "model/t5/t5.h"
#include "model/train/checkpoint.h"

namespace anvil::model {

// The boxes of master weights and AdamW moments this rank writes. Syncs.
std::vector<engine::HostSlice> t5_checkpoint_slices(T5Model& model, int dp_rank,
                                                    engine::Stream& stream);

// Sets the master weights (and the compute copy) this rank holds, and unless weights_only the
// AdamW moments, from whole logical tensors. InvalidArgument naming the tensor when a shape
// differs, NotFound when one is missing. Syncs.
absl::Status t5_load_checkpoint(T5Model& model, const TensorLookup& lookup, bool weights_only,
                                engine::Stream& stream);

}  // namespace anvil::model
