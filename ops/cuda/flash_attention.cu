// CUDA twin of ops/flash_attention.h: fills the kernels' Params from the checked views and
// launches ops/cuda/flash_attention_{forward,backward}_{bf16,f16}.cu. Workspace (backward only):
//   dvec      [B, H, Tq] f32                           rowsum(dout * out)
//   drel_rows [B, H, ceil(Tq / 64), Tq + Tk - 1] f32   relative buckets only: per dq block
//   drel_diag [H, Tq + Tk - 1] f32                     sums of dS along each diagonal
// The saved dropout mask (masks.dropout_keep) goes to the kernels as p.keep_bits: forward
// writes it, backward reads it.
#include "ops/cuda/flash_attention_launch.h"
#include "ops/cuda/flash_attention_tiles.cuh"
#include "ops/flash_attention.h"

namespace anvil::ops::cuda {
namespace {

const int32_t* ints(ConstTensorView v) { return v.empty() ? nullptr : v.as<int32_t>(); }

flash::Params make_params(const FlashAttentionArgs& a, ConstTensorView q, ConstTensorView k,
                          ConstTensorView v, const AttentionMasks& m) {
  flash::Params p{};
  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.ldq = q.strides[0];
  p.ldk = k.strides[0];
  p.ldv = v.strides[0];
  p.tq = static_cast<int>(a.q_len);
  p.tk = static_cast<int>(a.kv_len);
  p.heads = static_cast<int>(a.heads);
  p.group = static_cast<int>(a.group());
  p.total_heads = static_cast<int>(a.total_heads == 0 ? a.heads : a.total_heads);
  p.head_offset = static_cast<int>(a.head_offset);
  p.dh = static_cast<int>(a.head_dim);
  p.causal = a.causal;
  p.bias = static_cast<int>(a.bias);
  p.scale_log2 = a.scale * flash::kLog2e;
  p.seg_q = ints(m.seg_q);
  p.seg_k = ints(m.seg_k);
  p.kv_lengths = ints(m.kv_lengths);
  p.prefix_end = ints(m.prefix_end);
  p.rel_buckets = ints(m.rel_buckets);
  p.rel_table = m.rel_table.empty() ? nullptr : m.rel_table.as<float>();
  p.dropout_p = a.dropout_p;
  p.keep_scale = 1.0f / (1.0f - a.dropout_p);
  p.seed = a.seed;
  p.offset = a.offset;
  p.keep_bits = a.dropout_p > 0.0f && !m.dropout_keep.empty()
                    ? reinterpret_cast<uint32_t*>(m.dropout_keep.as<int32_t>())
                    : nullptr;
  return p;
}

}  // namespace

bool flash_attention_forward_uses_wgmma(const FlashAttentionArgs& args, ConstTensorView q,
                                        ConstTensorView k, ConstTensorView v,
                                        const AttentionMasks& masks) {
  return args.kernel == AttentionKernel::kWgmma && q.dtype == engine::DType::kBF16 &&
         flash::forward_sm90a_supports(make_params(args, q, k, v, masks));
}

size_t flash_attention_workspace_bytes(const FlashAttentionArgs& args, int64_t /*num_buckets*/) {
  int64_t floats = args.batch * args.heads * args.q_len;
  if (args.bias == AttentionBias::kRelativeBuckets) {
    const int64_t diags = args.q_len + args.kv_len - 1;
    floats +=
        (args.batch * flash::num_row_blocks(static_cast<int>(args.q_len)) + 1) * args.heads * diags;
  }
  return static_cast<size_t>(floats) * sizeof(float);
}

void flash_attention_forward(const FlashAttentionArgs& args, TensorView out, TensorView lse,
                             ConstTensorView q, ConstTensorView k, ConstTensorView v,
                             const AttentionMasks& masks, Stream& stream) {
  flash::Params p = make_params(args, q, k, v, masks);
  p.o = out.data;
  p.ldo = out.strides[0];
  p.lse = lse.as<float>();
  const int batch = static_cast<int>(args.batch);
  if (q.dtype == engine::DType::kF16) {
    flash::forward_f16(p, batch, stream.cuda_stream());
  } else if (flash_attention_forward_uses_wgmma(args, q, k, v, masks)) {
    flash::forward_sm90a_bf16(p, batch, stream.cuda_stream());
  } else {
    flash::forward_bf16(p, batch, stream.cuda_stream());
  }
}

void flash_attention_backward(const FlashAttentionArgs& args, TensorView dq, TensorView dk,
                              TensorView dv, TensorView d_rel_table, ConstTensorView dout,
                              ConstTensorView q, ConstTensorView k, ConstTensorView v,
                              ConstTensorView out, ConstTensorView lse, const AttentionMasks& masks,
                              Workspace ws, Stream& stream) {
  flash::Params p = make_params(args, q, k, v, masks);
  p.out = out.data;
  p.ldo = out.strides[0];
  p.dout = dout.data;
  p.ldd = dout.strides[0];
  p.dq = dq.data;
  p.dk = dk.data;
  p.dv = dv.data;
  p.ld_dq = dq.strides[0];
  p.ld_dk = dk.strides[0];
  p.ld_dv = dv.strides[0];
  p.lse = const_cast<float*>(lse.as<float>());  // read only in backward
  p.dvec = static_cast<float*>(ws.data);
  if (args.bias == AttentionBias::kRelativeBuckets) {
    p.drel_rows = p.dvec + args.batch * args.heads * args.q_len;
    p.drel_diag = p.drel_rows + args.batch * args.heads * flash::num_row_blocks(p.tq) *
                                    flash::num_diagonals(p.tq, p.tk);
    p.d_rel_table = d_rel_table.as<float>();
    p.num_buckets = static_cast<int>(d_rel_table.dim(0));
  }
  const int batch = static_cast<int>(args.batch);
  if (q.dtype == engine::DType::kF16) {
    flash::backward_f16(p, batch, stream.cuda_stream());
  } else {
    flash::backward_bf16(p, batch, stream.cuda_stream());
  }
}

}  // namespace anvil::ops::cuda
