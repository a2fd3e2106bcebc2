// The linear heads of bin/finetune's `head = linear` (Megatron's Classification and
// MultipleChoice heads, megatron/model/classification.py, multiple_choice.py) on the final
// hidden state h at each sequence's classification position (GPT: its last token, after ln_f;
// BERT: [CLS], the first), with x = h, or with a pooler (BERT, Megatron's Pooler)
// x = tanh(Wp h + bp)  (pooler.dense.weight Wp [d, d], pooler.dense.bias bp [d]):
//   classification, K classes, one sequence per example:
//     logits[e, k] = W[k] . Drop(x[e]) + b[k]           classifier.weight W [K, d], .bias b [K]
//   multiple choice, C sequences (choices) per example (RACE: 4):
//     logits[e, c] = W[0] . Drop(x[e*C + c]) + b[0]     classifier.weight W [1, d], .bias b [1]
//   loss(e) = -log softmax(logits[e])[label_e]; prediction = argmax (ties: the smaller index).
// (The multiple-choice bias shifts all C logits alike: its gradient is exactly 0, kept 0.)
// Drop = dropout(p) while training (Megatron's classification_dropout, p = hidden_dropout):
// element i of the [rows, d] input is kept (scaled by 1 / (1 - p)) when Philox uniform
// (seed ^ kHeadDropoutKey, offset, i) >= p. Init as Megatron's get_linear_layer with
// init_method_normal: Wp, W ~ N(0, init_std) (ops::init_normal_sample, counters from
// kHeadInitCounter over the flat vector), biases 0. The parameters are a flat f32 host vector
// [Wp | bp | W | b] with host AdamW state: the head is small next to the model, and only the
// rows at the classification positions travel between the model's device and the host. The
// math is in double.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/host_slice.h"
#include "model/model.h"

namespace anvil::model::blocks {

// Philox counter of the head's element 0 (far from the model's flat offsets, which start at 0).
inline constexpr uint64_t kHeadInitCounter = uint64_t{1} << 62;
// Philox key of the head's dropout: the head's seed xor this (apart from the model's masks).
inline constexpr uint64_t kHeadDropoutKey = 0x48454144u;  // "HEAD"

struct HeadDropout {
  float p = 0.0f;       // 0: none (evaluation)
  uint64_t offset = 0;  // Philox counter of element 0 (distinct per forward)
};

// Over examples e of logits [labels.size(), classes]: the sum of -log softmax(logits[e])[label]
// and the number whose argmax (ties: the smaller index) is the label.
double cls_loss_sum(absl::Span<const double> logits, absl::Span<const int32_t> labels);
int64_t cls_correct(absl::Span<const double> logits, absl::Span<const int32_t> labels);

class LinearHead {
 public:
  // classes >= 2 (classification, choices = 1) or choices >= 2 (multiple choice: classes is
  // then the number of choices and W has one row); pooler: BERT's tanh pooler first.
  LinearHead(int64_t d, int64_t classes, int64_t choices, float init_std, uint64_t seed,
             bool pooler = false);

  int64_t d() const { return d_; }
  int64_t classes() const { return classes_; }                     // logits per example
  int64_t rows_per_example() const { return choices_; }            // sequences per example
  int64_t outputs() const { return choices_ > 1 ? 1 : classes_; }  // rows of W
  bool pooler() const { return pooler_; }

  // logits (=) [examples, classes] from hidden [examples * rows_per_example, d].
  std::vector<double> forward(absl::Span<const double> hidden, int64_t examples,
                              const HeadDropout& drop) const;
  // The backward of scale * sum_e loss(e) after forward(hidden, ...): dhidden (=) [rows, d];
  // the parameter gradients accumulate (+=) into grads(). Returns sum_e loss(e).
  double backward(absl::Span<const double> hidden, absl::Span<const double> logits,
                  absl::Span<const int32_t> labels, double scale, const HeadDropout& drop,
                  absl::Span<double> dhidden);

  // Flat [Wp | bp | W | b] views: values, f32 gradients (AdamW reads them), AdamW moments.
  std::vector<float>& values() { return value_; }
  const std::vector<float>& values() const { return value_; }
  std::vector<float>& grads() { return grad_; }
  void zero_grads();
  double grad_sum_squares() const;
  // AdamW as the models' optimizer_step (the weights decay, the biases do not; grad_scale = clip
  // factor).
  void optimizer_step(const OptimizerStep& s);

  // classifier.weight [outputs, d], classifier.bias [outputs] (and pooler.dense.weight [d, d],
  // pooler.dense.bias [d]) for a checkpoint.
  std::vector<engine::HostSlice> slices() const;
  // Sets every tensor of slices() that `lookup` finds (NotFound: left as it is) and returns
  // their names; InvalidArgument naming the tensor when its shape differs (e.g. another
  // number of classes); the lookup's other errors.
  absl::StatusOr<std::vector<std::string>> load(const TensorLookup& lookup);

 private:
  struct Part {
    const char* name;
    std::vector<int64_t> shape;
    int64_t offset;
    bool decay;
  };
  std::vector<Part> parts() const;  // [Wp, bp,] W, b: where each lives in the flat vector
  float w(int64_t o, int64_t j) const { return value_[static_cast<size_t>(w_ + o * d_ + j)]; }
  // x: Drop's input [rows, d] (hidden, or the pooler's output).
  std::vector<double> head_input(absl::Span<const double> hidden) const;
  // Drop's factor for input element i: 1 / (1 - p) kept, 0 dropped (1 without dropout).
  double keep(const HeadDropout& drop, int64_t i) const;

  int64_t d_, classes_, choices_;
  uint64_t seed_;
  bool pooler_;
  int64_t w_;                                // offset of W (after the pooler's Wp, bp)
  std::vector<float> value_, grad_, m_, v_;  // [(d * d + d) + outputs * d + outputs]
};

}  // namespace anvil::model::blocks
