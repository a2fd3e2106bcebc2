// The pickle subset torch.save writes (protocol 2), both ways, without executing anything.
//
// read_pickle interprets the opcodes PROTO, EMPTY_DICT/LIST/TUPLE, MARK, SETITEM(S),
// APPEND(S), BINUNICODE, SHORT_BINSTRING, BINSTRING, BININT/BININT1/BININT2, LONG1, BINFLOAT,
// NONE, NEWTRUE/NEWFALSE, TUPLE/TUPLE1/2/3, GLOBAL, REDUCE, NEWOBJ, BUILD, BINPERSID,
// BINGET/LONG_BINGET, BINPUT/LONG_BINPUT, MEMOIZE and STOP into a value tree
// (io/torch_pt/value.h). A GLOBAL is looked up in a whitelist of names and only recorded:
// torch._utils._rebuild_tensor_v2 (applied to a storage reference it becomes a tensor value),
// torch.<T>Storage, torch dtypes, torch.Size, torch.device, collections.OrderedDict,
// argparse.Namespace (the fork's `args`), set, the enums and small records Megatron-DeepSpeed
// and DeepSpeed store (megatron.enums.*, DynamicLossScaler, ZeroStageEnum, fragment_address)
// and numpy's RNG-state array records. Any other opcode or global is refused with an error
// naming it, its byte position and `what` (the file); so are a truncated stream, a stack
// underflow and a memo index never stored.
// write_pickle writes a value tree back with the same opcodes, as torch.save lays tensors out
// (GLOBAL _rebuild_tensor_v2, a BINPERSID ('storage', torch.<T>Storage, key, 'cpu', numel)
// tuple, offset, size, stride, requires_grad, OrderedDict()), so torch.load reads it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "io/torch_pt/value.h"

namespace anvil::io::torch_pt {

absl::StatusOr<ValuePtr> read_pickle(std::string_view bytes, const std::string& what);

// InvalidArgument for a value the subset cannot express (a global outside the whitelist).
absl::StatusOr<std::string> write_pickle(const Value& root);

// Whether GLOBAL module.name may appear ("torch.FloatStorage", "argparse.Namespace", ...).
bool global_allowed(const std::string& dotted);

}  // namespace anvil::io::torch_pt
