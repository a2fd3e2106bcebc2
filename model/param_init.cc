// Writing a parameter's initial values into its targets (see param_init.h).
#include "model/param_init.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::model {

ops::TpSplit tp_split(const Param& p, int tp, int tp_rank) {
  ops::TpSplit s;
  ANVIL_CHECK_MSG(!p.shape.empty() && p.shape.size() <= 2,
                  absl::StrCat("parameter init: ", p.name, " must have 1 or 2 dims"));
  s.rows = p.shape[0];
  s.cols = p.shape.size() == 2 ? p.shape[1] : 1;
  if (p.tp_split_dim < 0 || tp == 1) return s;
  ANVIL_CHECK_MSG(p.tp_split_dim < static_cast<int>(p.shape.size()),
                  absl::StrCat("parameter init: ", p.name, " split along a missing dim"));
  s.split_dim = p.tp_split_dim;
  s.parts = p.tp_parts;
  s.tp = tp;
  s.tp_rank = tp_rank;
  return s;
}

void init_range(const InitTarget& t, const Param& p, int64_t first, int64_t count,
                ops::InitNormalArgs args, engine::Stream& stream) {
  const int64_t begin = p.offset + first, end = begin + count;
  // The parameter's elements from flat position lo on fill `dst`.
  auto put = [&](engine::TensorView dst, int64_t lo) {
    args.first = lo - p.offset;
    ops::init_normal(args, dst, stream);
  };
  if (t.part == nullptr) {
    put(flat_slice(t.buf, begin, {count}), begin);
    return;
  }
  for (size_t b = 0; b < t.part->buckets().size(); ++b) {
    const parallel::ZeroPiece piece = t.part->piece(b);
    const int64_t lo = std::max(begin, piece.begin), hi = std::min(end, piece.end);
    if (hi <= lo) continue;
    put(flat_slice(t.buf, piece.shard_offset + lo - piece.begin, {hi - lo}), lo);
  }
}

}  // namespace anvil::model
