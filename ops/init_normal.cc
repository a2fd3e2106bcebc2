// Dispatcher for the deterministic parameter initialization (math in ops/init_normal.h):
//   kNormal    dst[j] = (float)(sigma * N(seed, offset + tp_whole_index(tp, first + j))), or 0
//              past `valid`;   kConstant  dst[j] = value   (=)
// Checks dtype, device, the TP split and the element range, then runs the CPU or CUDA twin.
#include "ops/init_normal.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::ops {

void init_normal(const InitNormalArgs& args, TensorView dst, Stream& stream) {
  using engine::DType;
  const bool cuda = stream.is_cuda();
  const DType t = dst.dtype;
  const bool dtype_ok =
      t == DType::kF32 || t == DType::kBF16 || t == DType::kF16 || (!cuda && t == DType::kF64);
  ANVIL_CHECK_MSG(
      dtype_ok && (!dst.empty() || dst.numel() == 0) && dst.device == stream.device() &&
          dst.is_contiguous(),
      absl::StrCat("init_normal: dst must be contiguous f32/bf16/f16", cuda ? "" : "/f64", " on ",
                   std::string(engine::device_name(stream.device())), ", got ",
                   engine::describe(dst)));
  const TpSplit& s = args.tp;
  const bool split_ok = s.rows >= 1 && s.cols >= 1 && s.split_dim >= -1 && s.split_dim <= 1 &&
                        s.parts >= 1 && s.tp >= 1 && s.tp_rank >= 0 && s.tp_rank < s.tp &&
                        (s.split_dim != 0 || s.rows % s.parts == 0) &&
                        (s.split_dim != 1 || s.cols % s.parts == 0);
  ANVIL_CHECK_MSG(split_ok, absl::StrCat("init_normal: bad TP split rows=", s.rows,
                                         " cols=", s.cols, " split_dim=", s.split_dim,
                                         " parts=", s.parts, " tp=", s.tp, " tp_rank=", s.tp_rank));
  ANVIL_CHECK_MSG(
      args.first >= 0 && args.first + dst.numel() <= s.rows * s.cols,
      absl::StrCat("init_normal: elements [", args.first, ", ", args.first + dst.numel(),
                   ") outside the shard of ", s.rows * s.cols));
  ANVIL_CHECK_MSG(args.kind == InitKind::kConstant || args.sigma >= 0.0,
                  absl::StrCat("init_normal: sigma must be >= 0, got ", args.sigma));
  if (dst.numel() == 0) return;
  if (cuda) {
    cuda::init_normal(args, dst, stream);
  } else {
    cpu::init_normal(args, dst, stream);
  }
}

}  // namespace anvil::ops
