// Shared setup of the T5 training tests (t5_checkpoint_test, t5_state_test,
// t5_trainer_parallel_test): a tiny T5 v1.1 (dropout on) for model::Trainer on the CPU, and a
// deterministic T5 record stream. Header-only, as tiny_training.h.
#pragma once

#include <cstdint>

#include "model/t5/t5_train_model.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model::testing_parallel {

// vocab 37 (padded 128), d 16, 4 heads of 4, d_ff 24, 2 + 2 layers, 8 buckets; encoder 8 and
// decoder 6 tokens, micro-batch 2, global batch 8, `steps` steps of tiny_train_config's
// cosine-decayed AdamW with warmup 2, clipping at 1, on the CPU.
inline TrainConfig tiny_t5_train_config(int64_t steps) {
  TrainConfig c = tiny_train_config();  // the loop's settings (the GPT [model] is unused)
  c.family = "t5";
  T5Config& t = t5_config(c);
  t.vocab_size = 37;
  t.d_model = 16;
  t.d_kv = 4;
  t.n_heads = 4;
  t.d_ff = 24;
  t.n_encoder_layers = 2;
  t.n_decoder_layers = 2;
  t.num_buckets = 8;
  t.max_distance = 6;
  t.dropout = 0.1f;
  t.version = T5Version::kV1_1;
  c.model.vocab_size = t.vocab_size;
  c.data.seq_len = 8;
  c.data.decoder_seq_len = 6;
  c.train.global_batch = 8;
  c.train.steps = steps;
  c.optim.schedule.warmup_steps = 2;
  c.optim.schedule.decay_steps = steps;
  return c;
}

// T5 record i (model/t5/t5_train_model.h), depending on i only: tokens in [0, vocab), an encoder
// length in [Te/2, Te], about one label in four not counted (-1).
inline SampleFn hashed_t5_samples(int64_t enc_len, int64_t dec_len, int64_t vocab) {
  return [enc_len, dec_len, vocab](int64_t index, int32_t* out) {
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 3);
    auto next = [&x] {
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      return x;
    };
    for (int64_t t = 0; t < enc_len + 2 * dec_len; ++t) {
      out[t] = static_cast<int32_t>(next() % static_cast<uint64_t>(vocab));
    }
    for (int64_t t = 1; t < dec_len; ++t) {
      if (next() % 4 == 0) out[enc_len + dec_len + t] = -1;
    }
    out[enc_len + 2 * dec_len] =
        static_cast<int32_t>(enc_len / 2 + static_cast<int64_t>(next() % (enc_len / 2 + 1)));
  };
}

}  // namespace anvil::model::testing_parallel
