// CPU twin of token + learned position embedding (reference for the CUDA kernels), with wte
// holding the vocabulary rows [vocab_start, vocab_start + vocab):
//   forward : out[t, :] = [tokens[t] in shard] wte[tokens[t] - vocab_start, :]
//                         + (wpe given ? wpe[positions[t], :] : 0)                        (=)
//   backward: dwte[tokens[t] - vocab_start, :] += dout[t, :] for tokens in the shard;
//             dwpe[positions[t], :] += dout[t, :] when dwpe is given                     (+=)
// Plain loops, math in double. Activations f32/f64/bf16; dwte/dwpe f32 (or f64). Tokens are
// processed in order, so the backward is deterministic. Ids are range-checked by the dispatcher.
#include "ops/embedding.h"

#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

// Row of wte holding token `id`, or -1 when the id belongs to another vocabulary shard.
int64_t local_row(const EmbeddingArgs& a, int32_t id) {
  const int64_t row = static_cast<int64_t>(id) - a.vocab_start;
  return row >= 0 && row < a.vocab ? row : -1;
}

// out: [n, dim]; tokens: [n] i32; positions: [n] i32 (unused when wpe is null);
// wte: [vocab, dim]; wpe: [max_pos, dim] or null.
template <typename T>
void forward_impl(const EmbeddingArgs& a, T* out, const int32_t* tokens, const int32_t* positions,
                  const T* wte, const T* wpe) {
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t row = local_row(a, tokens[t]);
    const int64_t pos = wpe == nullptr ? 0 : positions[t] * a.dim;
    for (int64_t c = 0; c < a.dim; ++c) {
      const double te = row < 0 ? 0.0 : load(wte, row * a.dim + c);
      const double pe = wpe == nullptr ? 0.0 : load(wpe, pos + c);
      store(out, t * a.dim + c, te + pe);
    }
  }
}

// dwte: [vocab, dim] G (+=); dwpe: [max_pos, dim] G (+=) or null; dout: [n, dim] T.
template <typename T, typename G>
void backward_impl(const EmbeddingArgs& a, G* dwte, G* dwpe, const T* dout, const int32_t* tokens,
                   const int32_t* positions) {
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t row = local_row(a, tokens[t]);
    const int64_t pos = dwpe == nullptr ? 0 : positions[t] * a.dim;
    for (int64_t c = 0; c < a.dim; ++c) {
      const double g = load(dout, t * a.dim + c);
      if (row >= 0) dwte[row * a.dim + c] += static_cast<G>(g);
      if (dwpe != nullptr) dwpe[pos + c] += static_cast<G>(g);
    }
  }
}

template <typename G>
G* data_or_null(TensorView v) {
  return v.empty() ? nullptr : v.as<G>();
}

}  // namespace

void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& /*stream*/) {
  dispatch_float(out.dtype, "cpu::embedding_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_impl<T>(args, out.as<T>(), tokens.as<int32_t>(), positions.as<int32_t>(), wte.as<T>(),
                    wpe.empty() ? nullptr : wpe.as<T>());
  });
}

void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& /*stream*/) {
  dispatch_float(dout.dtype, "cpu::embedding_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (dwte.dtype == engine::DType::kF64) {
      backward_impl<T, double>(args, dwte.as<double>(), data_or_null<double>(dwpe), dout.as<T>(),
                               tokens.as<int32_t>(), positions.as<int32_t>());
    } else {
      backward_impl<T, float>(args, dwte.as<float>(), data_or_null<float>(dwpe), dout.as<T>(),
                              tokens.as<int32_t>(), positions.as<int32_t>());
    }
  });
}

}  // namespace anvil::ops::cpu
