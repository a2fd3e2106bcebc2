// CPU twin of token + learned position embedding (reference for the CUDA kernels):
//   forward : out[t, :] = wte[tokens[t], :] + wpe[positions[t], :]                    (=)
//   backward: dwte[tokens[t], :] += dout[t, :]; dwpe[positions[t], :] += dout[t, :]  (+=)
// Plain loops, math in double. Activations f32/f64/bf16; dwte/dwpe f32 (or f64). Tokens are
// processed in order, so the backward is deterministic. Ids are range-checked by the dispatcher.
#include "ops/embedding.h"

#include <type_traits>

#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

// out: [n, dim]; tokens, positions: [n] i32; wte: [vocab, dim]; wpe: [max_pos, dim].
template <typename T>
void forward_impl(const EmbeddingArgs& a, T* out, const int32_t* tokens, const int32_t* positions,
                  const T* wte, const T* wpe) {
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t tok = tokens[t] * a.dim, pos = positions[t] * a.dim;
    for (int64_t c = 0; c < a.dim; ++c) {
      store(out, t * a.dim + c, load(wte, tok + c) + load(wpe, pos + c));
    }
  }
}

// dwte: [vocab, dim] G (+=); dwpe: [max_pos, dim] G (+=); dout: [n, dim] T.
template <typename T, typename G>
void backward_impl(const EmbeddingArgs& a, G* dwte, G* dwpe, const T* dout, const int32_t* tokens,
                   const int32_t* positions) {
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t tok = tokens[t] * a.dim, pos = positions[t] * a.dim;
    for (int64_t c = 0; c < a.dim; ++c) {
      const double g = load(dout, t * a.dim + c);
      dwte[tok + c] += static_cast<G>(g);
      dwpe[pos + c] += static_cast<G>(g);
    }
  }
}

}  // namespace

void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& /*stream*/) {
  dispatch_float(out.dtype, "cpu::embedding_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_impl<T>(args, out.as<T>(), tokens.as<int32_t>(), positions.as<int32_t>(), wte.as<T>(),
                    wpe.as<T>());
  });
}

void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& /*stream*/) {
  dispatch_float(dout.dtype, "cpu::embedding_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (dwte.dtype == engine::DType::kF64) {
      backward_impl<T, double>(args, dwte.as<double>(), dwpe.as<double>(), dout.as<T>(),
                               tokens.as<int32_t>(), positions.as<int32_t>());
    } else {
      backward_impl<T, float>(args, dwte.as<float>(), dwpe.as<float>(), dout.as<T>(),
                              tokens.as<int32_t>(), positions.as<int32_t>());
    }
  });
}

}  // namespace anvil::ops::cpu
