// Learning-rate schedule, Megatron's AnnealingLR (megatron/learning_rates.py, BigScience fork).
// Megatron counts the schedule in samples: the iteration-based settings are converted with the
// global batch G (warmup W = warmup_steps * G, decay end D = decay_steps * G, as
// get_learning_rate_scheduler does), the sample-based ones are used as they are. At position n
// (samples of the applied updates so far):
//   n <= W:            lr(n) = lr * n / W                     (linear warmup from 0; W > 0)
//   constant:          lr(n) = lr                              (after warmup)
//   n >= D:            lr(n) = min_lr                          (after the decay)
//   W < n < D:         r = (n - W) / (D - W),  lr(n) = min_lr + c(r) * (lr - min_lr)
//                      cosine: c = (cos(pi r) + 1) / 2,  linear: c = 1 - r
// Token-based decay (decay_tokens > 0, --lr-decay-tokens): after the warmup the ratio is
//   r = (tokens - warmup_tokens) / (decay_tokens - warmup_tokens), min_lr once tokens exceed
//   decay_tokens, where warmup_tokens is the token count seen when n was exactly W.
// When each lr is used (LrScheduler, Megatron's order): the first update uses lr(0) (= 0 during
// a warmup); after every *applied* update the position advances by that step's global batch
// (`lr_scheduler.step(increment)` after optimizer.step()), so update k uses the lr of the
// samples of the k - 1 updates before it. A skipped update (non-finite gradient) does not move
// the schedule. The token count the scheduler sees is Megatron's consumed_train_tokens at that
// call: the tokens of the steps *before* the current one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace anvil::model {

enum class DecayStyle { kConstant, kLinear, kCosine };

// "constant" | "linear" | "cosine"; InvalidArgument otherwise.
absl::StatusOr<DecayStyle> parse_decay_style(std::string_view name);
std::string_view decay_style_name(DecayStyle style);

struct LrSchedule {
  double lr = 3e-4;              // peak learning rate, reached at the end of warmup
  double min_lr = 0.0;           // floor of the decay
  int64_t warmup_steps = 0;      // W in steps (used when warmup_samples is 0)
  int64_t decay_steps = 0;       // D in steps, counted from step 0 (used when decay_samples is 0)
  int64_t warmup_samples = 0;    // > 0: W in samples (--lr-warmup-samples)
  int64_t decay_samples = 0;     // > 0: D in samples (--lr-decay-samples)
  int64_t decay_tokens = 0;      // > 0: token-based decay (--lr-decay-tokens)
  double warmup_fraction = 0.0;  // > 0: W = this fraction of D (--lr-warmup-fraction)
  DecayStyle style = DecayStyle::kCosine;

  // W and D in samples for a global batch G (Megatron's conversion of the step counts). W is
  // a double: Megatron's lr_warmup_fraction * D is one.
  double warmup_in_samples(int64_t global_batch) const;
  int64_t decay_in_samples(int64_t global_batch) const;
  // InvalidArgument naming the numbers (lr < min_lr, W >= D for a decaying style, ...).
  absl::Status validate(int64_t global_batch = 1) const;
  // The step-based closed form: the lr after `step` applied updates at a constant global batch
  // (the lr that update step + 1 uses), without token-based decay. It equals the scheduler's
  // (Megatron's, in samples) exactly after the warmup and to rounding during it (lr * n / W
  // rounds lr * n first); the trainer uses the scheduler.
  double at(int64_t step) const;
  // The closed form at position `samples` with W and D in samples (no token-based decay).
  double at_samples(int64_t samples, int64_t global_batch) const;
};

// The scheduler's state as checkpoints keep it (Megatron's num_steps, num_tokens,
// warmup_tokens).
struct LrSchedulerState {
  int64_t samples = 0;        // position: samples of the applied updates
  int64_t tokens = 0;         // consumed tokens at the last step() call
  int64_t warmup_tokens = 0;  // tokens when the position was exactly W (token-based decay)
};

// AnnealingLR as a state machine: lr() is the learning rate of the next update.
class LrScheduler {
 public:
  LrScheduler() = default;
  LrScheduler(const LrSchedule& schedule, int64_t global_batch);

  double lr() const { return lr_; }
  const LrSchedule& schedule() const { return schedule_; }
  const LrSchedulerState& state() const { return state_; }
  // After an applied update of `increment` samples; `consumed_tokens`: the run's consumed
  // tokens before that update's (Megatron's args.consumed_train_tokens at the call).
  void step(int64_t increment, int64_t consumed_tokens);
  // Megatron's load_state_dict: the saved position, then the lr recomputed.
  void restore(const LrSchedulerState& s);

 private:
  void update_lr();  // Megatron's get_lr(), including its warmup_tokens bookkeeping

  LrSchedule schedule_;
  double warmup_ = 0.0;  // W in samples
  int64_t decay_ = 0;    // D in samples
  LrSchedulerState state_;
  double lr_ = 0.0;
};

}  // namespace anvil::model
