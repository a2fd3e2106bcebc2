// The tagged value tree of torch.save pickles (io/torch_pt/value.h).
#include "io/torch_pt/value.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace anvil::io::torch_pt {
namespace {

struct DTypeInfo {
  DType t;
  const char* name;
  const char* storage;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "float64", "DoubleStorage", 8}, {DType::kF32, "float32", "FloatStorage", 4},
    {DType::kF16, "float16", "HalfStorage", 2},   {DType::kBF16, "bfloat16", "BFloat16Storage", 2},
    {DType::kI64, "int64", "LongStorage", 8},     {DType::kI32, "int32", "IntStorage", 4},
    {DType::kI16, "int16", "ShortStorage", 2},    {DType::kI8, "int8", "CharStorage", 1},
    {DType::kU8, "uint8", "ByteStorage", 1},      {DType::kBool, "bool", "BoolStorage", 1},
};

const DTypeInfo& info(DType t) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.t == t) return d;
  }
  return kDTypes[1];
}

ValuePtr make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

}  // namespace

const char* dtype_name(DType t) { return info(t).name; }
const char* dtype_storage_class(DType t) { return info(t).storage; }
size_t dtype_size(DType t) { return info(t).size; }

absl::StatusOr<DType> dtype_of_storage_class(const std::string& name) {
  for (const DTypeInfo& d : kDTypes) {
    if (name == d.storage) return d.t;
  }
  return absl::NotFoundError(
      absl::StrCat("torch.", name, " is not a storage type this reader knows"));
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorRef::contiguous() const {
  if (stride.size() != shape.size()) return false;
  int64_t expect = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] != 1 && stride[k] != expect) return false;
    expect *= shape[k];
  }
  return true;
}

ValuePtr Value::none() { return make(Kind::kNone); }
ValuePtr Value::boolean(bool v) {
  ValuePtr p = make(Kind::kBool);
  p->b = v;
  return p;
}
ValuePtr Value::integer(int64_t v) {
  ValuePtr p = make(Kind::kInt);
  p->i = v;
  return p;
}
ValuePtr Value::floating(double v) {
  ValuePtr p = make(Kind::kFloat);
  p->f = v;
  return p;
}
ValuePtr Value::str(std::string v) {
  ValuePtr p = make(Kind::kStr);
  p->s = std::move(v);
  return p;
}
ValuePtr Value::list(std::vector<ValuePtr> v) {
  ValuePtr p = make(Kind::kList);
  p->items = std::move(v);
  return p;
}
ValuePtr Value::tuple(std::vector<ValuePtr> v) {
  ValuePtr p = make(Kind::kTuple);
  p->items = std::move(v);
  return p;
}
ValuePtr Value::make_dict(bool ordered) {
  ValuePtr p = make(Kind::kDict);
  p->ordered = ordered;
  return p;
}
ValuePtr Value::global(std::string dotted) {
  ValuePtr p = make(Kind::kGlobal);
  p->s = std::move(dotted);
  return p;
}
ValuePtr Value::object(std::string dotted, std::vector<ValuePtr> args, bool newobj,
                       ValuePtr state) {
  ValuePtr p = make(Kind::kObject);
  p->s = std::move(dotted);
  p->items = std::move(args);
  p->newobj = newobj;
  p->state = std::move(state);
  return p;
}
ValuePtr Value::tensor_ref(TensorRef t) {
  ValuePtr p = make(Kind::kTensor);
  p->tensor = std::move(t);
  return p;
}

void Value::set(const std::string& key, ValuePtr v) {
  for (auto& [k, val] : dict) {
    if (k->kind == Kind::kStr && k->s == key) {
      val = std::move(v);
      return;
    }
  }
  dict.emplace_back(str(key), std::move(v));
}

ValuePtr Value::get(const std::string& key) const {
  for (const auto& [k, val] : dict) {
    if (k->kind == Kind::kStr && k->s == key) return val;
  }
  return nullptr;
}

ValuePtr Value::get_int_key(int64_t key) const {
  for (const auto& [k, val] : dict) {
    if (k->kind == Kind::kInt && k->i == key) return val;
  }
  return nullptr;
}

ValuePtr Value::attr(const std::string& name) const {
  if (kind != Kind::kObject || !state || state->kind != Kind::kDict) return nullptr;
  return state->get(name);
}

std::string describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kStr:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kTuple:
      return "tuple";
    case Value::Kind::kDict:
      return v.ordered ? "OrderedDict" : "dict";
    case Value::Kind::kTensor:
      return absl::StrCat("tensor ", dtype_name(v.tensor.dtype), " [",
                          absl::StrJoin(v.tensor.shape, ", "), "]");
    case Value::Kind::kGlobal:
      return v.s;
    case Value::Kind::kObject:
      return absl::StrCat(v.s, " object");
  }
  return "?";
}

}  // namespace anvil::io::torch_pt
