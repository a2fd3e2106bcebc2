// Megatron-DeepSpeed (BLOOM-style GPTModelPipe) tensors <-> anvil's checkpoint tensors: names,
// layouts and states (docs/checkpoints.md "Megatron-DeepSpeed checkpoints").
//   fp32/ -> master/, exp_avg/ -> exp_avg/, exp_avg_sq/ -> exp_avg_sq/
//   word_embeddings.weight [padded, d] -> wte.weight [vocab, d] (padding rows dropped)
//   word_embeddings.norm.* -> wte_ln.*, final_layernorm.* -> ln_f.*
//   layers.i.input_layernorm -> h.i.ln_1, self_attention.query_key_value -> h.i.attn.c_attn
//   (rows [heads][3][head_dim] -> [3][heads][head_dim], weight and bias),
//   self_attention.dense -> h.i.attn.c_proj, post_attention_layernorm -> h.i.ln_2,
//   mlp.dense_h_to_4h -> h.i.mlp.c_fc, mlp.dense_4h_to_h -> h.i.mlp.c_proj.
// anvil_to_megatron_ds is the inverse (export): wte.weight [vocab, d] -> word_embeddings.weight
// [padded_vocab, d] with the padding rows 0 (the fork trains them; anvil has none to give).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/host_slice.h"

namespace anvil::model {

struct MegatronDsDims {
  int64_t heads = 0;
  int64_t vocab = 0;  // the tokenizer's vocabulary (rows kept of the padded embedding)
};

// InvalidArgument naming the tensor for a name no rule maps or a shape that does not split
// into the heads or hold the vocabulary.
absl::StatusOr<std::vector<engine::HostSlice>> megatron_ds_to_anvil(
    const std::map<std::string, engine::HostSlice>& fork, const MegatronDsDims& dims);

// Whole anvil tensors (master/, exp_avg/, exp_avg_sq/ + name) -> whole fork tensors (fp32/,
// exp_avg/, exp_avg_sq/ + fork name). InvalidArgument naming the tensor for a name no rule maps
// (another family's tensor), a slice that is not the whole tensor, or padded_vocab < vocab.
absl::StatusOr<std::map<std::string, engine::HostSlice>> anvil_to_megatron_ds(
    const std::vector<engine::HostSlice>& anvil, const MegatronDsDims& dims, int64_t padded_vocab);

}  // namespace anvil::model
