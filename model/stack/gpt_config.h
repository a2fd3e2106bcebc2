// GptConfig (the architecture of a GPT, BLOOM, LLaMA or BERT model; see model/stack/gpt.h), the
// run shape and precision, and GptShard (the part of the model one rank holds): the plain
// structs that the model, its layout (gpt_layout.h) and its initialization (gpt_init.h) share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "model/run_options.h"
#include "ops/flash_attention.h"
#include "ops/rotary.h"
#include "parallel/parallel_config.h"

namespace anvil::parallel {
class Comm;
}  // namespace anvil::parallel

namespace anvil::model {

using parallel::kMaxLayers;  // (parallel/parallel_config.h)

// How attention sees token positions: a learned table wpe added to the embedding (GPT-2), the
// ALiBi bias of BLOOM in the attention logits (ops/flash_attention.h), rotary embeddings of q
// and k (LLaMA; ops/rotary.h), or nothing.
enum class PositionEmbedding { kLearned, kAlibi, kRotary, kNone };
// The MLP's nonlinearity: GELU (tanh approximation, GPT-2/BLOOM) on c_fc's ffn outputs, or a
// gated unit act(g) * u on c_fc's 2 * ffn outputs [g | u] (ops/glu.h; SwiGLU: LLaMA).
// kGeluErf: the exact erf GELU (HF BERT's "gelu", ops/activation.h) on c_fc's ffn outputs.
enum class Activation { kGelu, kSwiglu, kGeglu, kReglu, kLiglu, kGeluErf };
// The normalization of the blocks and of ln_f: LayerNorm (gamma, beta) or RMSNorm (gamma).
enum class Norm { kLayerNorm, kRmsNorm };
// Where the blocks normalize: kPre (GPT-2, Megatron's BERT): x + f(LN(x)), a final ln_f;
// kPost (original BERT, HF BertModel): LN(x + f(x)), no ln_f.
enum class NormPlacement { kPre, kPost };
// The head on the last layer's (pre-LN: ln_f's) output. kLm: the LM head over the (padded)
// vocabulary, tied to wte or not, and the cross-entropy of every target. kMlm: Megatron's
// BertLMHead (dense, GELU-erf, LayerNorm, tied decoder + vocab-parallel output bias; the stack's
// mlm_head.cc) and, with binary_head, the pooler and the 2-way head on the [CLS] rows; its loss
// is reported in parts and averaged over the counted (masked) targets of each micro-batch.
enum class Head { kLm, kMlm };

struct GptConfig {
  int64_t vocab_size = 50257;    // real vocabulary
  int64_t padded_vocab = 0;      // 0: round vocab_size up to a multiple of vocab_multiple
  int64_t vocab_multiple = 128;  // Megatron's make-vocab-size-divisible-by (x TP: 128 * tp)
  // The LM / MLM loss's softmax spans the padded rows too, as Megatron's (NVIDIA and BigScience)
  // vocab-parallel cross-entropy does; false: the real vocabulary only ([model]
  // vocab_padding_in_loss).
  bool vocab_padding_in_loss = false;
  int64_t max_seq_len = 1024;  // rows of the position embedding
  int64_t d_model = 768;
  int64_t n_heads = 12;
  // Key/value heads (Megatron's --num-query-groups, HF num_key_value_heads); 0: n_heads. Fewer
  // than n_heads is grouped-query attention: c_attn then has (n_heads + 2 n_kv_heads) head_dim
  // rows in Megatron-core's grouped order (model/blocks/attention.h); n_kv_heads == n_heads keeps
  // the q | k | v blocks of GPT-2's c_attn.
  int64_t n_kv_heads = 0;
  int64_t n_layers = 12;
  int64_t ffn_hidden = 0;  // 0: 4 * d_model
  float hidden_dropout = 0.0f;
  float attention_dropout = 0.0f;
  float ln_eps = 1e-5f;
  float init_std = 0.02f;
  // Architecture options; the defaults are GPT-2.
  PositionEmbedding position_embedding = PositionEmbedding::kLearned;
  float rotary_base = 10000.0f;     // kRotary: inv_freq_i = base^(-2i / rot_dim)
  float rotary_percent = 1.0f;      // kRotary: rot_dim = rotary_percent * head_dim (even)
  ops::RotaryScaling rope_scaling;  // kRotary: HF rope_scaling (linear, llama3) of inv_freq
  // Mistral's sliding_window: 0 = none. Not implemented as a window: every run's sequence
  // length must be <= it, where it equals full causal attention (train config, inference).
  int64_t sliding_window = 0;
  bool embed_layernorm = false;  // BLOOM: LayerNorm wte_ln right after the word embedding
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  bool bias = true;            // biases of every linear layer
  bool qkv_bias = false;       // a bias on c_attn even without `bias` (Qwen2)
  bool tie_embeddings = true;  // LM head = wte; false: a separate lm_head.weight
  // The encoder features a family may switch on (BERT, model/bert/bert_family.cc: causal false,
  // head kMlm, token types, binary head); the stack tests these, never the family.
  // false: every key visible (bidirectional) up to the sample's length: micro-batches carry
  // the key lengths [B] (GptBatch::lengths).
  bool causal = true;
  NormPlacement norm_placement = NormPlacement::kPre;
  Head head = Head::kLm;
  // Rows of the token-type embedding (BERT 2); 0: none. > 0: micro-batches carry token types.
  int64_t type_vocab_size = 0;
  bool binary_head = false;  // head kMlm: pooler + 2-way head (Megatron's BERT default; off with
                             // --bert-no-binary-head); micro-batches carry its labels

  bool learned_positions() const { return position_embedding == PositionEmbedding::kLearned; }
  bool glu() const { return activation != Activation::kGelu && activation != Activation::kGeluErf; }
  bool mlm_head() const { return head == Head::kMlm; }
  bool post_ln() const { return norm_placement == NormPlacement::kPost; }
  bool layernorm() const { return norm == Norm::kLayerNorm; }
  bool has_qkv_bias() const { return bias || qkv_bias; }
  // c_fc's output width: ffn, or 2 * ffn (g | u) with a gated activation (Megatron-DeepSpeed's
  // --glu-activation sizing: ffn_hidden is the width after the gate).
  int64_t fc_out() const { return glu() ? 2 * ffn() : ffn(); }
  int64_t rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(rotary_percent) * head_dim());
  }

  int64_t padded() const {
    return padded_vocab ? padded_vocab
                        : (vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
  }
  // Columns of the loss's softmax: the real vocabulary, or the padded one (Megatron's).
  int64_t loss_vocab() const { return vocab_padding_in_loss ? padded() : vocab_size; }
  int64_t ffn() const { return ffn_hidden ? ffn_hidden : 4 * d_model; }
  int64_t head_dim() const { return d_model / n_heads; }
  int64_t kv_heads() const { return n_kv_heads == 0 ? n_heads : n_kv_heads; }
  bool grouped_query() const { return kv_heads() != n_heads; }
  // Rows of c_attn: 3 d_model, or (n_heads + 2 n_kv_heads) * head_dim.
  int64_t qkv_rows() const { return (n_heads + 2 * kv_heads()) * head_dim(); }
  // InvalidArgument naming the numbers (d_model % n_heads, padded < vocab, ...) and the size
  // bounds: every dimension <= engine::kMaxDimension, n_layers <= kMaxLayers, every weight and
  // the whole model <= engine::kMaxElements elements (engine/checked_math.h).
  absl::Status validate() const;
  // Parameters in GEMMs incl. the tied embedding (for MFU: 6N + 12 L d T FLOPs per token).
  int64_t matmul_params() const;
  int64_t total_params() const;
};

struct GptRunShape {
  int64_t micro_batch;  // B
  int64_t seq_len;      // T <= max_seq_len
};

// The part of the model one rank holds (DESIGN.md §5). Tensor parallelism (tp > 1) splits the
// heads, the MLP hidden units and the padded vocabulary over the TP group (Megatron's column /
// row-parallel linears and vocab-parallel embedding and cross-entropy; padded_vocab % tp == 0);
// pipeline parallelism gives each rank model chunks of consecutive layers. Parameter names and
// dropout masks use global layer and head numbers, and parameters are initialized from their
// global element index, so every layout computes what the single-rank model computes.
struct GptShard {
  int tp = 1, tp_rank = 0;
  parallel::Comm* tp_comm = nullptr;  // the TP group (not owned); required when tp > 1
  // Global layer indices of each model chunk held here, in forward order (interleaved pipeline:
  // several chunks). Empty: one chunk with all layers.
  std::vector<std::vector<int64_t>> chunks;
  bool pre = true;        // chunk 0 starts the model: token + position embedding
  bool post = true;       // the last chunk ends it: final LN, tied LM head, loss
  int64_t act_slots = 1;  // activation sets per chunk: micro-batches in flight at once
  // Megatron's sequence parallelism (tp > 1): outside the TP-split layers (layernorms, dropout,
  // residual stream) each TP rank holds B*T/tp consecutive rows of the [B*T, d] activations;
  // all-gathers before the column-parallel linears and reduce-scatters after the row-parallel
  // ones replace the all-reduces. Needs B*T % tp == 0.
  bool sequence_parallel = false;
  // Gradient sync over the DP group dp_comm (not owned; parallel/grad_sync.h). Without it the
  // gradients stay local. zero_stage 0: reduce_gradients all-reduces them (plain DP, buckets of
  // dp_bucket_elems elements, 0: one). ZeRO (parallel/zero.h; dp_comm required): every bucket
  // (embeddings, each layer, final LayerNorm) split evenly over zero_dp ranks.
  // 1: f32 master (when separate) and AdamW moments hold this rank's pieces only; 2: also the
  // gradients (reduce-scattered layer by layer in backward); 3: also the parameters (gathered
  // layer by layer before use; the embedding and final-LN buckets stay gathered).
  int zero_stage = 0;
  int zero_dp = 1, zero_rank = 0;
  parallel::Comm* dp_comm = nullptr;
  int64_t dp_bucket_elems = 0;
  // Optimizer offload (ZeRO-Offload, parallel/offload_optimizer.h; zero_stage 0-2): the f32
  // master weights and AdamW moments of the state this rank updates (its ZeRO pieces) live in
  // host memory (pinned on CUDA) and AdamW runs there with offload_threads threads (0: all);
  // the device holds the compute copy and the gradients only.
  bool offload_optimizer = false;
  int offload_threads = 0;
  Recompute recompute = Recompute::kNone;

  // InvalidArgument naming the numbers (heads % tp, ffn % tp, padded vocab % tp, layer ranges).
  absl::Status validate(const GptConfig& cfg) const;
  // The chunks, with the default (all layers) filled in.
  std::vector<std::vector<int64_t>> layer_chunks(const GptConfig& cfg) const;
};

}  // namespace anvil::model
