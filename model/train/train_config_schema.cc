// bin/train's ini schema: every section and key with its type, default and documentation
// (engine/config.h), and docs/config.md generated from it. Parsing and validation into
// TrainConfig: model/train/train_config.cc.
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/config.h"
#include "model/stack/gpt_arch_config.h"
#include "model/train/family.h"
#include "model/train/precision_config.h"
#include "model/train/seq2seq_keys.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

using engine::ConfigSchema;
using engine::ConfigType;

// [model] type's documentation: each registered family's own (Family::doc), in type order.
std::string type_doc() {
  std::string doc = "Model family (a type of the model-family registry, model/train/family.h):";
  for (const std::string& type : family_registry().types()) {
    absl::StrAppend(&doc, " ", type, " = ", (*family_registry().find(type))->doc);
  }
  return doc;
}

ConfigSchema build_schema() {
  ConfigSchema s;
  const ConfigType kInt = ConfigType::kInt, kFloat = ConfigType::kFloat, kBool = ConfigType::kBool,
                   kString = ConfigType::kString;
  // [model]: GPT-2 shapes (Megatron flag names in parentheses where they differ).
  s.add("model", "vocab_size", kInt, "50257",
        "Real vocabulary size: token ids are < vocab_size (GPT-2 BPE: 50257; byte-level: 257).");
  s.add("model", "padded_vocab", kInt, "0",
        "Embedding rows incl. padding; 0 = vocab_size rounded up to a multiple of 128 "
        "(--make-vocab-size-divisible-by 128).");
  s.add("model", "vocab_padding_in_loss", kBool, "false",
        "Whether the LM (and BERT MLM, T5) loss's softmax spans the padded embedding rows. "
        "Megatron-LM and Megatron-DeepSpeed compute it over the whole padded vocabulary (the "
        "padded rows' logits join the normalizer and get gradients): true reproduces their "
        "losses and steps exactly (bin/convert import-megatron --vocab-padding-in-loss sets it "
        "and keeps the fork's padded rows). false (anvil's default): over the real vocabulary "
        "only, so no probability mass goes to ids that no tokenizer emits. With true the "
        "padded rows are initialized as the others, and checkpoints keep them (the model record "
        "gets vocab_padding_in_loss and padded_vocab: a resume with another setting or another "
        "padding, e.g. another tp without an explicit padded_vocab, is refused; bin/eval, "
        "bin/generate, bin/serve, bin/finetune and bin/convert take both from the record). "
        "Generation and eval argmax stay over the real vocabulary.");
  s.add("model", "max_seq_len", kInt, "1024",
        "Rows of the learned position embedding (--max-position-embeddings).");
  s.add("model", "d_model", kInt, "768", "Hidden size (--hidden-size).");
  s.add("model", "n_heads", kInt, "12",
        "Attention heads (--num-attention-heads); must divide d_model.");
  s.add("model", "n_kv_heads", kInt, "0",
        "Key/value heads (--num-query-groups; HF num_key_value_heads); 0 = n_heads. Fewer: "
        "grouped-query attention (GPT family, flash attention); must divide n_heads, and tp "
        "must divide it.");
  s.add("model", "n_layers", kInt, "12", "Transformer layers (--num-layers).");
  s.add("model", "ffn_hidden", kInt, "0", "MLP hidden size (--ffn-hidden-size); 0 = 4 * d_model.");
  s.add("model", "hidden_dropout", kFloat, "0.0",
        "Dropout after the attention and MLP output projections, in [0, 1) (Megatron's default "
        "is 0.1).");
  s.add("model", "attention_dropout", kFloat, "0.0",
        "Dropout on the attention probabilities, in [0, 1) (Megatron's default is 0.1).");
  s.add("model", "ln_eps", kFloat, "1e-5", "LayerNorm epsilon (--layernorm-epsilon).");
  s.add("model", "init_std", kFloat, "0.02",
        "Std of the normal parameter init (--init-method-std); residual output projections use "
        "init_std / sqrt(2 * n_layers).");
  s.add("model", "type", kString, "gpt", type_doc(), family_registry().types());
  add_gpt_arch_schema(s);
  // The families' own keys (T5: t5_version, decoder_layers, ...), in type order.
  for (const std::string& type : family_registry().types()) {
    const Family* f = *family_registry().find(type);
    if (f->schema) f->schema(s);
  }
  add_seq2seq_schema(s);
  // [data]
  s.add("data", "paths", kString, "",
        "The tokenized data (--data-path): one prefix PATH of PATH.bin + PATH.idx (Megatron mmap "
        "format, written by bin/preprocess), or weighted prefixes to blend, \"0.7 a_text_document "
        "0.3 b_text_document\" (weights need not sum to 1). Relative paths are resolved against "
        "the current working directory, not the ini file's directory.");
  s.add("data", "path", kString, "", "Alias of paths (set one of the two).");
  s.add_alias("data", "path", "paths");
  s.add("data", "split", kString, "969,30,1",
        "Train, validation, test weights over each dataset's sequences (--split), separated by "
        "',' or '/'.");
  s.add("data", "valid_paths", kString, "",
        "A separate validation set, same syntax as paths (--valid-data-path): all of its "
        "sequences are used for validation instead of the validation split of paths.");
  s.add("data", "train_weighted_split_paths", kString, "",
        "The training data as one named group (--train-weighted-split-paths, BigScience fork): "
        "\"NAME: W1 START1:END1 PREFIX1, W2 START2:END2 PREFIX2\", the datasets blended by "
        "weight, each over the sequences round(START * n) .. round(END * n) of its n; replaces "
        "paths and split (Megatron's data loading mode 2: both must stay unset). NAME names the "
        "index caches. Empty = paths.");
  s.add("data", "valid_weighted_split_paths", kString, "",
        "Named validation groups, same syntax, several separated by ';' "
        "(--valid-weighted-split-paths): each is evaluated separately and logged as \"NAME "
        "loss\", on its own stream of Megatron's validation sample counts. Unlike Megatron, "
        "also allowed with paths (they replace its validation split); excludes valid_paths. "
        "Empty = the validation split (or valid_paths).");
  s.add("data", "test_weighted_split_paths", kString, "",
        "Named test groups, same syntax (--test-weighted-split-paths), each evaluated once at "
        "the end. Empty = the test split.");
  s.add("data", "seq_len", kInt, "1024",
        "Tokens per sample T (--seq-length); <= [model] max_seq_len.");
  s.add("data", "seed", kInt, "1234",
        "Seed of the document and sample shuffles (--seed), in [0, 2^32). Samples and their "
        "order are Megatron's for the same data, split, seq_len, seed and sample counts.");
  s.add("data", "cache_dir", kString, "",
        "Directory of the index caches (--data-cache-path); empty = next to the data, named "
        "as Megatron names them (PREFIX_train_indexmap_*ns_*sl_*s_{doc,sample,shuffle}_idx.npy), "
        "so Megatron's and anvil's caches are interchangeable.");
  s.add("data", "mask_prob", kFloat, "0.15",
        "type bert: share of each sample's tokens masked for the MLM loss (--mask-prob).");
  s.add("data", "short_seq_prob", kFloat, "0.1",
        "type bert: probability of a shorter target length (--short-seq-prob).");
  s.add("data", "last_epoch_cutoff", kFloat, "0.95",
        "When a split needs E > 1 epochs and the last one contributes fewer than "
        "int(cutoff * samples per epoch) samples, the last epoch is shuffled separately "
        "(_build_index_mappings' cutoff_last_epoch: 0.95 in the BigScience fork, 0.80 in "
        "NVIDIA Megatron-LM), in (0, 1]. A value other than 0.95 adds _{cutoff}lec to the "
        "index cache names (Megatron's names do not hold it).");
  s.add("data", "eod_token", kInt, "50256",
        "End-of-document token id, used by eod_mask_loss and reset_position_ids (GPT-2 BPE: "
        "50256; byte-level data: 256).");
  s.add("data", "eod_mask_loss", kBool, "false",
        "--eod-mask-loss: no loss where the input token is eod_token (the prediction of the "
        "first token of the next document); the loss is the mean over the remaining tokens.");
  s.add("data", "reset_position_ids", kBool, "false",
        "--reset-position-ids: position ids restart at 0 after every eod_token.");
  s.add("data", "reset_attention_mask", kBool, "false",
        "--reset-attention-mask: tokens attend only to earlier tokens of their own document "
        "(documents end at eod_token).");
  s.add("data", "valid_exhausted", kString, "wrap",
        "When an evaluation asks a validation or test set for more samples than it was sized "
        "for (Megatron's counts; e.g. a resumed run with a smaller eval_interval, or a small "
        "valid_paths set): wrap = start the set over, with one warning (anvil's default); "
        "error = stop the run with exit status 1 naming the set, as Megatron-DeepSpeed does "
        "(its validation iterator raises StopIteration).",
        {"wrap", "error"});
  s.add("data", "prefix_lm", kBool, "false",
        "Prefix-LM (Megatron-DeepSpeed's pretrain_prefix_lm.py), type gpt: each sample (each "
        "document with reset_attention_mask) gets a random prefix length p drawn as the fork's "
        "get_prefix_indices draws it (randint(1, seq_len); per document randint(start + 1, eod)), "
        "with CPython's generator seeded per sample from [data] seed and the sample index "
        "(the fork: one process-wide stream); tokens before p attend to each other "
        "bidirectionally, the rest causally.");
  s.add("data", "loss_on_targets_only", kBool, "false",
        "--loss-on-targets-only (prefix_lm): no loss on the prefix tokens except the last one "
        "(which predicts the first target); see prefix_lm_normalizer for what the loss is "
        "divided by.");
  s.add("data", "prefix_lm_normalizer", kString, "pipe",
        "prefix_lm: what each micro-batch's (weighted) loss sum is divided by, as the fork "
        "divides it. pipe = its GPTModelPipe under DeepSpeed (the BigScience runs): micro_batch "
        "x the expected loss tokens per sample, seq_len, or with loss_on_targets_only (seq_len + "
        "1) / 2, and (seq_len + 2) / 3 when also reweighted (a constant: each counted token "
        "weighs the same whatever its micro-batch); mask_sum = its GPTModel without DeepSpeed "
        "(pretrain_prefix_lm.py's loss_func): the sum of the micro-batch's loss mask, i.e. the "
        "mean over its counted tokens (weighted). Equal when every token counts.",
        {"pipe", "mask_sum"});
  s.add("data", "mtf", kBool, "false",
        "Packed multitask finetuning (T0 / BLOOMZ: Megatron-DeepSpeed's "
        "finetune_t0_non_causal_decoder.py with DecoderPackedMTFDataset), type gpt with alibi or "
        "rotary positions: paths = PREFIX names the pair PREFIX_inputs_document / "
        "PREFIX_targets_document (bin/preprocess --json-keys inputs targets, as the fork's "
        "--data-path); pairs are shuffled per epoch with [data] seed and packed greedily into "
        "rows of seq_len + 1 tokens as the fork packs them, each pair attending only to itself, "
        "its inputs bidirectionally and its targets causally; the loss is the mean over each "
        "micro-batch's target tokens. One unweighted prefix only; not combined with prefix_lm, "
        "reset_attention_mask or [curriculum].");
  s.add("data", "pad_token", kInt, "-1",
        "mtf: the tokenizer's pad id (the fork's tokenizer.pad; BLOOM's tokenizer: 3) that fills "
        "each packed row; no loss where the input token is pad_token. Required with mtf.");
  s.add("data", "reweight_loss_based_on_position_frequency", kBool, "false",
        "--reweight-loss-based-on-position-frequency (prefix_lm): the loss of the token at "
        "position t of seq_len T (its row position) weighs (T - t) / (T + 1) * 2, in f32 as the "
        "fork's reweight_loss_mask_ computes it; the weights multiply each token's loss and "
        "gradient in the LM head's cross-entropy.");
  // [train]
  s.add("train", "micro_batch", kInt, "8", "Samples per forward/backward (--micro-batch-size).");
  s.add("train", "global_batch", kInt, "0",
        "Samples per optimizer step (--global-batch-size); a multiple of micro_batch, the "
        "quotient is the number of gradient accumulation steps. 0 = micro_batch.");
  s.add("train", "steps", kInt, "1000",
        "Optimizer steps (--train-iters). Set train_samples or train_tokens instead for a "
        "sample- or token-based run (then steps must stay unset).");
  s.add("train", "train_samples", kInt, "0",
        "Samples to train on (--train-samples); 0 = steps * global_batch. The steps follow as "
        "Megatron's update_train_iters computes them (train_samples // global_batch, with "
        "rampup_batch_size the ramp-up's steps plus the rest // global_batch; a partial last "
        "batch is dropped), and the train split is sized for train_samples.");
  s.add("train", "train_tokens", kInt, "0",
        "Tokens to train on (--train-tokens): the run stops after the step at which consumed "
        "samples * seq_len reaches it (the Microsoft fork's loop condition; the BigScience "
        "fork parses the flag but ignores it). With train_samples the earlier end wins; 0 = "
        "off.");
  s.add("train", "rampup_batch_size", kString, "",
        "Global batch ramp-up \"START INCREMENT SAMPLES\" (--rampup-batch-size): the global "
        "batch starts at START and grows by INCREMENT (n = (global_batch - START) / INCREMENT "
        "times) every SAMPLES / n consumed samples, up to global_batch once SAMPLES are "
        "consumed; the data sampler advances by each step's batch and the lr schedule by the "
        "samples of each applied step. START and INCREMENT must be multiples of micro_batch * "
        "dp. Megatron allows it with sample-based runs only; here steps work too. Empty = off.");
  s.add("train", "skip_iterations", kString, "",
        "Steps whose data is consumed but not trained on, \"A-B C-D\" (1-based, inclusive, "
        "overlaps merged; --skip-train-iteration-range). Each such step advances the step "
        "counter and the data position by its global batch, without forward, backward, "
        "optimizer or lr schedule step. (The BigScience fork instead keeps its iteration "
        "counter and draws one micro-batch per skipped iteration; NVIDIA Megatron-LM's "
        "--iterations-to-skip does what anvil does.) Empty = none.");
  s.add("train", "kill_switch_path", kString, "",
        "A file whose existence stops the run (--kill-switch-path): checked at the start (exit "
        "0, nothing saved) and after every step (a checkpoint is saved into [checkpoint] save, "
        "then exit 0), as the BigScience fork does. Empty = off.");
  s.add("train", "seed", kInt, "1234", "Seed of the parameter init and of dropout (--seed).");
  s.add("train", "device", kString, "auto",
        "auto = CUDA (bf16 activations, f32 gradients and optimizer) when a GPU is visible, else "
        "CPU (f32).",
        {"auto", "cpu", "cuda"});
  s.add("train", "attention_kernel", kString, "auto",
        "CUDA flash-attention forward: auto = the Hopper kernel (sm_90a wgmma + TMA, "
        "warp-specialized) where it applies (bf16, head_dim 64 or 128, no ALiBi or relative "
        "bias, no attention dropout, no prefix-LM or MTF prefixes, compute capability 9.0) and "
        "is faster (not for causal attention at head 64 over <= 1024 keys), the FlashAttention-2 "
        "schedule on mma.sync elsewhere; mma_sync = always the latter. Backward is mma.sync "
        "either way. The CPU ignores it.",
        {"auto", "mma_sync"});
  s.add("train", "attention_dropout_mask", kString, "save",
        "Flash attention with attention_dropout > 0: save = the forward keeps its dropout mask "
        "as bits (B * heads/tp * T * T / 8 bytes a layer and micro-batch, in the memory plan's "
        "activations) for the backward; regenerate = the backward draws it again from Philox "
        "(no memory, slower: on the GPU the drawing is most of what dropout costs). The same mask "
        "either way, so losses are equal.",
        {"save", "regenerate"});
  s.add("train", "activation_dropout_kernel", kString, "two_pass",
        "CUDA MLP activation dropout (T5 v1.0's DenseReluDense; relu or gelu_erf): two_pass = "
        "the activation, then the dropout kernel (and two passes back); one_pass = both in one "
        "kernel each way (ops/activation.h), the same bits. one_pass is experimental: its kernel "
        "has not yet run on a GPU (docs/performance.md). The CPU ignores it.",
        {"two_pass", "one_pass"});
  add_precision_keys(s);
  s.add("train", "eval_interval", kInt, "1000",
        "Evaluate on the validation split every N steps and at the end (--eval-interval); a "
        "run whose last step is a multiple of N evaluates twice there, on fresh samples each "
        "time, as Megatron does. 0 = only at the end.");
  s.add("train", "eval_iters", kInt, "100",
        "Validation iterations per evaluation (--eval-iters), each of one global batch (the "
        "current one under rampup_batch_size), as Megatron. Each evaluation reads the next "
        "samples of the validation stream (Megatron's validation iterator continues over the "
        "evaluations, and resumes from the checkpoint's consumed validation samples); the "
        "evaluation before the first step reads the samples the first periodic one will read "
        "without consuming them (Megatron has none). At the end of the run the test split is "
        "evaluated once (eval_iters global batches from its start: Megatron's 'lm loss' of "
        "the test data). A stream read past the end of its split (a resumed run with more "
        "evaluations than it was sized for) wraps around with a warning, where Megatron's "
        "sampler asserts. 0 = no evaluation.");
  s.add("train", "log_interval", kInt, "100", "Log a progress line every N steps.");
  s.add("train", "max_skipped_steps", kInt, "10",
        "Stop the run with an error (non-zero exit, no final checkpoint) after this many "
        "consecutive skipped steps: a step is skipped when its gradient norm is not finite, and "
        "a run that skips step after step has diverged; 0 = never stop.");
  s.add("train", "check_memory", kBool, "true",
        "Refuse to start when the memory plan of a rank exceeds the memory available to it: "
        "MemAvailable of /proc/meminfo on the CPU (also for the plans of one host's ranks "
        "together), the free bytes of the GPU on CUDA. false = allocate anyway (the CPU run may "
        "then be killed by the kernel's OOM killer).");
  // [optim]: AdamW with Megatron's AnnealingLR schedule.
  s.add("optim", "lr", kFloat, "3e-4",
        "Peak learning rate, reached at the end of warmup; in (0, 10].");
  s.add("optim", "min_lr", kFloat, "0.0", "Learning rate at the end of the decay; <= lr.");
  s.add("optim", "warmup_steps", kInt, "0",
        "Linear warmup from 0 to lr over this many steps (--lr-warmup-iters). The schedule "
        "counts samples, as Megatron's: warmup_steps * global_batch samples. The first step "
        "uses the lr of position 0 (0 during a warmup), step k the lr after the k - 1 applied "
        "steps before it; a skipped step does not advance the schedule.");
  s.add("optim", "warmup_samples", kInt, "0",
        "Warmup over this many samples instead (--lr-warmup-samples); 0 = use warmup_steps.");
  s.add("optim", "warmup_tokens", kInt, "0",
        "Warmup over this many tokens instead: warmup_samples = ceil(warmup_tokens / [data] "
        "seq_len) (not a Megatron flag: the BigScience fork's warmup is sample-based); 0 = off.");
  s.add("optim", "warmup_fraction", kFloat, "0.0",
        "Warmup over this fraction of the decay instead (--lr-warmup-fraction), in [0, 1]; 0 = "
        "off.");
  s.add("optim", "decay_style", kString, "cosine",
        "Decay from lr to min_lr between warmup_steps and decay_steps, constant afterwards "
        "(--lr-decay-style; Megatron's default is linear).",
        {"cosine", "linear", "constant"});
  s.add("optim", "decay_steps", kInt, "0",
        "Step at which the decay ends, counted from step 0 (--lr-decay-iters): decay_steps * "
        "global_batch samples; 0 = [train] steps (or train_samples when that is set).");
  s.add("optim", "decay_samples", kInt, "0",
        "Sample at which the decay ends instead (--lr-decay-samples); 0 = use decay_steps.");
  s.add("optim", "decay_tokens", kInt, "0",
        "Token-based decay (--lr-decay-tokens, BigScience fork): after the warmup the decay "
        "ratio is (tokens - warmup end's tokens) / (decay_tokens - warmup end's tokens), "
        "where tokens are those consumed before the previous step (Megatron's "
        "consumed_train_tokens when the scheduler steps); min_lr beyond decay_tokens. 0 = off.");
  s.add("optim", "weight_decay", kFloat, "0.01",
        "AdamW decoupled weight decay; not applied to biases and LayerNorm parameters.");
  s.add("optim", "beta1", kFloat, "0.9", "AdamW beta1 (--adam-beta1).");
  s.add("optim", "beta2", kFloat, "0.999", "AdamW beta2 (--adam-beta2; GPT-3 used 0.95).");
  s.add("optim", "eps", kFloat, "1e-8", "AdamW epsilon (--adam-eps).");
  s.add("optim", "clip_grad", kFloat, "1.0",
        "Clip the global L2 norm of the gradient to this value (--clip-grad); 0 = no clipping.");
  // [tokenizer]
  s.add("tokenizer", "type", kString, "",
        "The tokenizer the data was made with (bin/preprocess --tokenizer-type); empty = none. "
        "When set, [model] vocab_size and [data] eod_token default to its values (explicit "
        "values must agree) and checkpoints keep its files.",
        {"", "GPT2BPE", "BertWordPieceLowerCase", "BertWordPieceCase", "SentencePiece", "HF",
         "Byte"});
  s.add("tokenizer", "vocab_file", kString, "",
        "encoder.json / vocab.json (GPT2BPE), vocab.txt (WordPiece), .model (SentencePiece), "
        "tokenizer.json (HF).");
  s.add("tokenizer", "merge_file", kString, "", "merges.txt / vocab.bpe (GPT2BPE).");
  // [checkpoint]: docs/checkpoints.md
  s.add("checkpoint", "save", kString, "",
        "Directory to save checkpoints into (--save): DIR/step_XXXXXXXX/ and DIR/latest; empty "
        "= no saving. Saved every save_interval steps, at the end, on SIGTERM/SIGUSR1/a first "
        "Ctrl-C and at the exit limits.");
  s.add("checkpoint", "save_interval", kInt, "0",
        "Save every N steps (--save-interval); 0 = only at the end and when exiting early.");
  s.add("checkpoint", "keep_last", kInt, "0",
        "After a successful save, delete all but the newest K complete checkpoints; 0 = keep "
        "all.");
  s.add("checkpoint", "load", kString, "",
        "Directory to resume from (--load): the checkpoint `latest` names (or load_step); a "
        "broken one is refused and the newest complete earlier one used. Empty = start from "
        "scratch; a directory without checkpoints starts from scratch with a warning.");
  s.add("checkpoint", "load_step", kInt, "-1",
        "Step of the checkpoint to load; -1 = the one DIR/latest names.");
  s.add("checkpoint", "finetune", kBool, "false",
        "Load the weights only (--finetune): fresh AdamW state, step 0, any batch size and seed.");
  s.add("checkpoint", "override_lr_scheduler", kBool, "false",
        "On resume use the config's lr schedule (lr, min_lr, warmup, decay, decay style) where it "
        "differs from the checkpoint's; the position in it continues (--override-lr-scheduler).");
  s.add("checkpoint", "use_checkpoint_lr_scheduler", kBool, "false",
        "On resume use the checkpoint's lr schedule where it differs from the config's, and keep "
        "it in the checkpoints this run saves (--use-checkpoint-lr-scheduler). With neither "
        "option a differing schedule refuses the resume, naming each value, as Megatron asserts.");
  s.add("checkpoint", "exit_interval", kInt, "0",
        "Save and stop with status 0 after a step that is a multiple of N (--exit-interval); 0 = "
        "off.");
  s.add("checkpoint", "exit_duration_min", kFloat, "0",
        "Save and stop with status 0 after the first step that ends this many wall-clock minutes "
        "after the start (--exit-duration-in-mins); 0 = off.");
  // [log]
  s.add("log", "all_ranks", kBool, "false",
        "Print info lines on every rank, not only rank 0 (warnings always print everywhere).");
  s.add("log", "tensorboard_dir", kString, "",
        "Write TensorBoard event files into this directory (--tensorboard-dir), created when "
        "missing, from the last rank as Megatron: Megatron-DeepSpeed's scalar names "
        "(lm-loss-training/lm loss, learning-rate/learning-rate, grad-norm/grad-norm, "
        "lm-loss-validation/valid/lm loss validation, iteration-time/..., each also vs samples and "
        "vs tokens: docs/tensorboard.md). Empty = none.");
  s.add("log", "tensorboard_log_interval", kInt, "1",
        "Write the per-step scalars (loss, learning rate, grad norm, batch size) every N steps "
        "(--tensorboard-log-interval); throughput and memory are written every [train] "
        "log_interval steps, when the file is also flushed.");
  // [parallel]: parallel/parallel_config.cc
  parallel::add_parallel_schema(s);
  // [eval]: model/train/eval_config.cc; [finetune]: model/train/finetune_config.cc
  add_eval_schema(s);
  add_finetune_schema(s);
  // [curriculum]: model/train/curriculum.cc
  add_curriculum_schema(s);
  return s;
}

}  // namespace

const ConfigSchema& train_config_schema() {
  static const ConfigSchema* schema = new ConfigSchema(build_schema());
  return *schema;
}

std::string config_docs_markdown() {
  return absl::StrCat(
      "# bin/train configuration\n\n"
      "<!-- Generated by `build/bin/train --print-config-docs > docs/config.md` from the schema\n"
      "     in model/train/train_config_schema.cc; tests/model/train_config_test.cc fails when "
      "they "
      "differ. "
      "-->\n"
      "\n"
      "`bin/train` reads one ini file (see `configs/`). Sections and keys follow Megatron-LM's\n"
      "flags where one exists (named in parentheses). Every key is typed and has a default; an\n"
      "unknown section or key, a value of the wrong type or an inconsistent combination is an\n"
      "error naming the file, line and key. Any key can be overridden on the command line:\n"
      "\n"
      "```\n"
      "build/bin/train configs/tiny_cpu.ini train.steps=100 optim.lr=1e-3 [--dry-run]\n"
      "```\n"
      "\n"
      "`--dry-run` prints the model size and the memory plan and exits; `--print-device` prints\n"
      "the device `device = auto` resolves to. The effective configuration (every key, defaults\n"
      "included) is printed at start-up.\n"
      "\n"
      "Defaults that differ from Megatron-DeepSpeed's (BigScience fork, megatron/arguments.py);\n"
      "set them explicitly to reproduce a run of the fork:\n"
      "\n"
      "| key | anvil | the fork |\n"
      "|---|---|---|\n"
      "| `[model] hidden_dropout` | 0.0 | 0.1 (`--hidden-dropout`) |\n"
      "| `[model] attention_dropout` | 0.0 | 0.1 (`--attention-dropout`) |\n"
      "| `[optim] decay_style` | cosine | linear (`--lr-decay-style`) |\n"
      "| `[optim] lr` | 3e-4 | none: required (`--lr`) |\n"
      "| `[train] micro_batch` | 8 | none: required (`--micro-batch-size`) |\n"
      "| `[train] kill_switch_path`, `[curriculum]` | off | off (`--kill-switch-path`; "
      "DeepSpeed's `curriculum_learning`) |\n"
      "| `[model] vocab_padding_in_loss` | false: the loss's softmax over the real vocabulary, "
      "padded rows 0 and not saved | always the whole padded vocabulary: padded rows randomly "
      "initialized, trained and saved |\n"
      "\n"
      "Equal in both: init_std 0.02, ln_eps 1e-5, weight_decay 0.01, beta1 0.9, beta2 0.999, "
      "eps 1e-8,\n"
      "clip_grad 1.0, min_lr 0, seed 1234, eval_interval 1000, eval_iters 100, log_interval 100,\n"
      "initial_loss_scale 2^32, loss_scale_window 1000, hysteresis 2.\n"
      "\n"
      "Batch arithmetic: one optimizer step consumes `global_batch` samples of `seq_len` tokens,\n"
      "in `global_batch / micro_batch` forward/backward passes (gradient accumulation).\n"
      "Learning rate (Megatron's AnnealingLR, counted in samples): step s (counted from 1) of a\n"
      "run at a constant global batch with no skipped steps uses `lr * (s - 1) / warmup_steps`\n"
      "during warmup (0 at the first step, as Megatron), then the decay from `lr` to `min_lr`\n"
      "ending at `decay_steps`, then `min_lr`. A skipped step (non-finite gradient norm) keeps\n"
      "the lr where it is: Megatron's fp16 loss-scaler path does so; its bf16/fp32 path has no\n"
      "such check and applies the non-finite update, which anvil never does.\n"
      "\n"
      "Data: Megatron's GPT dataset, exactly. Each dataset's sequences are split into train,\n"
      "validation and test ranges by `split`; a split of N samples gets as many epochs as N\n"
      "needs, with the sequence order shuffled (numpy's `RandomState(seed)`), samples of\n"
      "`seq_len + 1` tokens that cross document boundaries and overlap by one token, and a\n"
      "shuffled sample order. N is Megatron's: train = `train_samples` (or\n"
      "`steps * global_batch`), validation = `(steps // eval_interval + 1) * eval_iters *\n"
      "global_batch`, test = `eval_iters * global_batch`. Weighted `paths` are blended\n"
      "with Megatron's rule (each dataset asked for `ceil(N * weight * 1.005)` samples; position\n"
      "i takes the dataset whose share lags its weight most). The index is cached as `.npy`\n"
      "files next to the data (or in `cache_dir`), built by each process that lacks them.\n"
      "\n"
      "Size limits (engine/checked_math.h), checked before anything is allocated: every\n"
      "dimension (`vocab_size`, `padded_vocab`, `max_seq_len`, `d_model`, `ffn_hidden`,\n"
      "`micro_batch`, `global_batch`, `eod_token`) is at most 2^31 - 1; `n_layers` and\n"
      "`virtual_stages` at most 2^16; each weight, the parameter count, the largest activation\n"
      "of a micro-batch (`micro_batch * seq_len * max(d_model, ffn_hidden, padded vocabulary)`)\n"
      "and the tokens of a step at most 2^44 elements; the training and validation samples of a\n"
      "run at most 2^40. The memory plan (`--dry-run` prints it) must fit the memory available\n"
      "(a rank's free GPU memory; on the CPU the host's MemAvailable, for each rank and for the\n"
      "ranks of one host together) unless `check_memory = false`; `[optim] lr` is at most 10.\n"
      "\n",
      train_config_schema().markdown());
}

}  // namespace anvil::model
