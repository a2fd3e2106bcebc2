// Shared setup of the training tests (dp_training_test, gpt_parallel_test, checkpoint tests): a
// tiny GPT trained 3 steps with dropout on, deterministic sample streams (GPT, BERT), and HF's
// BERT options.
// Header-only: the parallel tests link the model library, the shared testing library does not.
#pragma once

#include <cstdint>

#include "model/train/sample_record.h"
#include "model/train/trainer.h"

namespace anvil::model::testing_parallel {

// vocab 50, d 32, 4 heads, 2 layers, T 16, micro-batch 2, global batch 16 (8 micro-batches on
// one rank), 3 steps of cosine-decayed AdamW with warmup 1, clipping at 1, on the CPU.
inline TrainConfig tiny_train_config() {
  TrainConfig c;
  c.model.vocab_size = 50;
  c.model.max_seq_len = 16;
  c.model.d_model = 32;
  c.model.n_heads = 4;
  c.model.n_layers = 2;
  c.model.hidden_dropout = 0.1f;
  c.model.attention_dropout = 0.1f;
  c.data.seq_len = 16;
  c.train.micro_batch = 2;
  c.train.global_batch = 16;
  c.train.steps = 3;
  c.train.seed = 5;
  c.train.device = "cpu";
  c.train.eval_iters = 0;
  c.train.log_interval = 100;
  c.optim.schedule.lr = 1e-2;
  c.optim.schedule.min_lr = 1e-3;
  c.optim.schedule.warmup_steps = 1;
  c.optim.schedule.decay_steps = 3;
  c.optim.schedule.style = DecayStyle::kCosine;
  c.optim.weight_decay = 0.1;
  c.optim.clip_grad = 1.0;
  return c;
}

// HF BertForPreTraining's layout on `m`: the stack's encoder features, post-LN, GELU-erf, the
// embedding LayerNorm (word + position + token type), two token types, the MLM and binary heads.
inline void use_hf_bert(GptConfig& m) {
  m.causal = false;
  m.head = Head::kMlm;
  m.type_vocab_size = 2;
  m.binary_head = true;
  m.norm_placement = NormPlacement::kPost;
  m.activation = Activation::kGeluErf;
  m.embed_layernorm = true;
}

// A training config of [model] type bert with HF BertForPreTraining's layout.
inline void use_hf_bert(TrainConfig& c) {
  c.family = "bert";
  use_hf_bert(c.model);
}

// Sample i: pseudo-random tokens that depend on i only.
inline SampleFn hashed_samples(int64_t seq_len, int64_t vocab) {
  return [seq_len, vocab](int64_t index, int32_t* out) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1);
    for (int64_t t = 0; t <= seq_len; ++t) {
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      out[t] = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
    }
  };
}

// BERT record i (model/train/sample_record.h), depending on i only: L = T/2 + (hash % (T/2 + 1))
// real tokens in [1, vocab), types 0 for the first half of them and 1 after, labels at position 1
// and at about a fifth of the other real positions, padding after L, is_random = hash & 1.
inline SampleFn hashed_bert_samples(int64_t seq_len, int64_t vocab) {
  return [seq_len, vocab](int64_t index, int32_t* out) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 7);
    auto next = [&x] {
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      return x;
    };
    const BertRecord r = bert_record(out, seq_len);
    const int64_t len = seq_len / 2 + static_cast<int64_t>(next() % (seq_len / 2 + 1));
    for (int64_t t = 0; t < seq_len; ++t) {
      const bool real = t < len;
      const bool masked = real && (t == 1 || (t > 0 && next() % 5 == 0));
      r.tokens[t] = real ? 1 + static_cast<int32_t>(next() % (vocab - 1)) : 0;
      r.types[t] = real && t >= len / 2 ? 1 : 0;
      r.labels[t] = masked ? static_cast<int32_t>(next() % vocab) : -1;
      r.loss_mask[t] = masked ? 1 : 0;
      r.padding_mask[t] = real ? 1 : 0;
    }
    *r.is_random = static_cast<int32_t>(next() & 1);
  };
}

}  // namespace anvil::model::testing_parallel
