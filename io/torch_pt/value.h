// The values a torch.save pickle holds, as a small tagged tree (never Python objects): what
// io/torch_pt/pickle_reader.h builds and pickle_writer.h writes back.
//   none, bool, int (int64), float (double), str (UTF-8), list, tuple, dict (insertion order;
//   `ordered` marks a collections.OrderedDict), tensor (a reference into a storage of the
//   archive: dtype, key, element offset, shape, strides), global (a class or constant named by
//   module and name: torch.bfloat16, an enum class), object (a whitelisted class applied to
//   arguments, by REDUCE or NEWOBJ, with the state BUILD gave it: argparse.Namespace,
//   torch.Size, an enum member, a set, DeepSpeed's loss scaler ...).
// Values are shared (shared_ptr) because a pickle's memo may reference one object twice.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io::torch_pt {

// The storage element types torch.save names by class (torch.FloatStorage ...).
enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

const char* dtype_name(DType t);           // "float32", ...
const char* dtype_storage_class(DType t);  // "FloatStorage", ...
size_t dtype_size(DType t);
// torch.<name> of a storage class; NotFound for any other name.
absl::StatusOr<DType> dtype_of_storage_class(const std::string& name);

struct TensorRef {
  DType dtype = DType::kF32;
  std::string key;             // the storage's record: archive/data/<key>
  int64_t storage_numel = 0;   // elements of the whole storage
  int64_t offset = 0;          // first element of this tensor in the storage
  std::vector<int64_t> shape;  // torch.Size
  std::vector<int64_t> stride;
  bool requires_grad = false;
  int64_t numel() const;
  bool contiguous() const;
};

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kList,
    kTuple,
    kDict,
    kTensor,
    kGlobal,
    kObject
  };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                                    // kStr; kGlobal and kObject: "module.name"
  std::vector<ValuePtr> items;                      // kList, kTuple; kObject: the arguments
  std::vector<std::pair<ValuePtr, ValuePtr>> dict;  // kDict
  bool ordered = false;                             // kDict: a collections.OrderedDict
  bool newobj = false;  // kObject: made by NEWOBJ (cls.__new__), not REDUCE
  ValuePtr state;       // kObject: what BUILD set (null: none)
  TensorRef tensor;     // kTensor

  static ValuePtr none();
  static ValuePtr boolean(bool v);
  static ValuePtr integer(int64_t v);
  static ValuePtr floating(double v);
  static ValuePtr str(std::string v);
  static ValuePtr list(std::vector<ValuePtr> v = {});
  static ValuePtr tuple(std::vector<ValuePtr> v = {});
  static ValuePtr make_dict(bool ordered = false);
  static ValuePtr global(std::string dotted);
  static ValuePtr object(std::string dotted, std::vector<ValuePtr> args, bool newobj,
                         ValuePtr state);
  static ValuePtr tensor_ref(TensorRef t);

  // kDict: appends (or replaces, keeping the position) a string key.
  void set(const std::string& key, ValuePtr v);
  // kDict: the value under a string key (null when absent).
  ValuePtr get(const std::string& key) const;
  // kDict: the value under an integer key (null when absent).
  ValuePtr get_int_key(int64_t key) const;
  // kObject with a dict state (argparse.Namespace): the attribute (null when absent).
  ValuePtr attr(const std::string& name) const;
};

// A short description of a value's kind for error messages ("dict", "tensor float32 [4, 8]").
std::string describe(const Value& v);

}  // namespace anvil::io::torch_pt
