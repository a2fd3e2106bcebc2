// Reader and writer of torch.save's pickle subset (io/torch_pt/pickle.h). The reader is a stack
// machine over the whitelisted opcodes that builds values and never calls anything: a GLOBAL
// becomes a name, REDUCE / NEWOBJ an object record holding that name and its arguments.
#include "io/torch_pt/pickle.h"

#include <cstring>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace anvil::io::torch_pt {
namespace {

constexpr char kRebuildTensor[] = "torch._utils._rebuild_tensor_v2";
constexpr char kStorageRef[] = "<storage>";  // a BINPERSID storage reference (internal)

// Classes and constants that are only recorded, by exact module.name.
constexpr const char* kAllowedGlobals[] = {
    "torch._utils._rebuild_tensor_v2",
    "collections.OrderedDict",
    "argparse.Namespace",
    "torch.Size",
    "torch.device",
    "__builtin__.set",
    // An enum member pickles as getattr(<enum class>, "<member name>") (Python >= 3.8); only
    // recorded, and only applied to a whitelisted class and a name.
    "__builtin__.getattr",
    "builtins.getattr",
    "builtins.set",
    "torch.float64",
    "torch.float32",
    "torch.float16",
    "torch.bfloat16",
    "torch.int64",
    "torch.int32",
    "torch.int8",
    "torch.uint8",
    "torch.bool",
    // Megatron-DeepSpeed's args (argparse values) and DeepSpeed's optimizer records.
    "megatron.enums.PositionEmbeddingType",
    "megatron.enums.AttnMaskType",
    "megatron.enums.AttnType",
    "megatron.enums.LayerType",
    "megatron.enums.UnpackedBinaryAttentionMaskType",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.zero.config.ZeroStageEnum",
    "deepspeed.utils.tensor_fragment.fragment_address",
    // np.random.get_state() (the fork's np_rng_state): an ndarray record of raw bytes.
    "numpy.core.multiarray._reconstruct",
    "numpy.ndarray",
    "numpy.dtype",
    "_codecs.encode",
};

const char* opcode_name(unsigned char op) {
  switch (op) {
    case 0x93:
      return "STACK_GLOBAL";
    case 0x95:
      return "FRAME";
    case 0x8c:
      return "SHORT_BINUNICODE";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'P':
      return "PERSID";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'F':
      return "FLOAT";
    case 'V':
      return "UNICODE";
    case 'S':
      return "STRING";
    case 'g':
      return "GET";
    case 'p':
      return "PUT";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8b:
      return "LONG4";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 0x8f:
      return "EMPTY_SET";
    case '0':
      return "POP";
    case '1':
      return "POP_MARK";
    case '2':
      return "DUP";
    case 'l':
      return "LIST";
    case 'd':
      return "DICT";
    default:
      return "unknown";
  }
}

class Reader {
 public:
  Reader(std::string_view b, const std::string& what) : b_(b), what_(what) {}

  absl::StatusOr<ValuePtr> run() {
    while (true) {
      if (pos_ >= b_.size()) return err("the pickle ends before STOP (truncated)");
      const size_t at = pos_;
      const unsigned char op = static_cast<unsigned char>(b_[pos_++]);
      absl::Status s = step(op, at);
      if (!s.ok()) return s;
      if (stopped_) {
        if (stack_.size() != 1 || !marks_.empty()) {
          return err(absl::StrCat("STOP at byte ", at, " with ", stack_.size(),
                                  " values on the stack (expected 1)"));
        }
        return stack_[0];
      }
    }
  }

 private:
  absl::Status err(const std::string& m) const {
    return absl::DataLossError(absl::StrCat(what_, ": pickle: ", m));
  }

  absl::StatusOr<std::string_view> take(size_t n) {
    if (n > b_.size() - pos_) return err("the pickle ends inside an opcode's argument (truncated)");
    std::string_view v = b_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  absl::StatusOr<uint64_t> le(size_t n) {
    auto v = take(n);
    if (!v.ok()) return v.status();
    uint64_t x = 0;
    for (size_t k = 0; k < n; ++k) x |= uint64_t(static_cast<unsigned char>((*v)[k])) << (8 * k);
    return x;
  }
  absl::StatusOr<std::string> line() {
    const size_t nl = b_.find('\n', pos_);
    if (nl == std::string_view::npos) return err("GLOBAL without its newline (truncated)");
    std::string s(b_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return s;
  }

  absl::StatusOr<ValuePtr> pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return err(absl::StrCat("stack underflow at byte ", pos_ - 1));
    }
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<ValuePtr> top() {
    if (stack_.empty()) return err(absl::StrCat("stack underflow at byte ", pos_ - 1));
    return stack_.back();
  }
  absl::StatusOr<std::vector<ValuePtr>> pop_mark() {
    if (marks_.empty()) return err(absl::StrCat("no MARK before byte ", pos_ - 1));
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return items;
  }

  absl::Status set_items(Value& d, const std::vector<ValuePtr>& kv, size_t at) {
    if (d.kind != Value::Kind::kDict) {
      return err(absl::StrCat("SETITEM(S) at byte ", at, " on a ", describe(d), ", not a dict"));
    }
    if (kv.size() % 2 != 0) return err(absl::StrCat("SETITEMS at byte ", at, ": odd item count"));
    for (size_t k = 0; k < kv.size(); k += 2) {
      const Value& key = *kv[k];
      bool replaced = false;
      for (auto& [ek, ev] : d.dict) {
        if (ek->kind == key.kind && ((key.kind == Value::Kind::kStr && ek->s == key.s) ||
                                     (key.kind == Value::Kind::kInt && ek->i == key.i))) {
          ev = kv[k + 1];
          replaced = true;
        }
      }
      if (!replaced) d.dict.emplace_back(kv[k], kv[k + 1]);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> as_int(const ValuePtr& v, const char* field) {
    if (v->kind != Value::Kind::kInt) {
      return err(absl::StrCat(kRebuildTensor, ": ", field, " is a ", describe(*v), ", not an int"));
    }
    return v->i;
  }
  absl::StatusOr<std::vector<int64_t>> as_ints(const ValuePtr& v, const char* field) {
    if (v->kind != Value::Kind::kTuple) {
      return err(
          absl::StrCat(kRebuildTensor, ": ", field, " is a ", describe(*v), ", not a tuple"));
    }
    std::vector<int64_t> out;
    for (const ValuePtr& x : v->items) {
      auto i = as_int(x, field);
      if (!i.ok()) return i.status();
      if (*i < 0) return err(absl::StrCat(kRebuildTensor, ": negative ", field));
      out.push_back(*i);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
  // [, metadata]) -> a tensor reference, checked to lie inside its storage.
  absl::StatusOr<ValuePtr> rebuild_tensor(const Value& args) {
    if (args.kind != Value::Kind::kTuple || args.items.size() < 6 || args.items.size() > 7) {
      return err(
          absl::StrCat(kRebuildTensor, " with ", describe(args), " arguments (expected 6 or 7)"));
    }
    const Value& st = *args.items[0];
    if (st.kind != Value::Kind::kObject || st.s != kStorageRef) {
      return err(absl::StrCat(kRebuildTensor, ": the storage is a ", describe(st)));
    }
    TensorRef t = st.tensor;
    auto off = as_int(args.items[1], "storage_offset");
    if (!off.ok()) return off.status();
    auto shape = as_ints(args.items[2], "size");
    if (!shape.ok()) return shape.status();
    auto stride = as_ints(args.items[3], "stride");
    if (!stride.ok()) return stride.status();
    if (shape->size() != stride->size()) {
      return err(absl::StrCat(kRebuildTensor, ": size and stride of different lengths"));
    }
    if (args.items[4]->kind != Value::Kind::kBool) {
      return err(absl::StrCat(kRebuildTensor, ": requires_grad is a ", describe(*args.items[4])));
    }
    t.offset = *off;
    t.shape = *shape;
    t.stride = *stride;
    t.requires_grad = args.items[4]->b;
    // The last element addressed must lie inside the storage (no wrap-around: sizes < 2^40).
    int64_t last = t.offset;
    bool empty = false;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (t.shape[k] > (int64_t{1} << 40) || t.stride[k] > (int64_t{1} << 40)) {
        return err(absl::StrCat(kRebuildTensor, ": absurd size or stride"));
      }
      if (t.shape[k] == 0)
        empty = true;
      else
        last += (t.shape[k] - 1) * t.stride[k];
    }
    if (t.offset < 0 || (!empty && last >= t.storage_numel)) {
      return err(absl::StrCat("a tensor [", absl::StrJoin(t.shape, ", "), "] at offset ", t.offset,
                              " reaches past its storage ", t.key, " of ", t.storage_numel,
                              " elements"));
    }
    return Value::tensor_ref(std::move(t));
  }

  // BINPERSID's ('storage', torch.<T>Storage, key, location, numel).
  absl::StatusOr<ValuePtr> storage_ref(const Value& pid, size_t at) {
    const auto bad = [&](const std::string& m) {
      return err(absl::StrCat("BINPERSID at byte ", at, ": ", m));
    };
    if (pid.kind != Value::Kind::kTuple || pid.items.size() != 5 ||
        pid.items[0]->kind != Value::Kind::kStr || pid.items[0]->s != "storage") {
      return bad(
          absl::StrCat("a ", describe(pid), ", not ('storage', type, key, location, numel)"));
    }
    const Value& type = *pid.items[1];
    if (type.kind != Value::Kind::kGlobal || !absl::StartsWith(type.s, "torch.")) {
      return bad(absl::StrCat("storage type ", describe(type)));
    }
    absl::StatusOr<DType> dt = dtype_of_storage_class(type.s.substr(6));
    if (!dt.ok()) return bad(std::string(dt.status().message()));
    if (pid.items[2]->kind != Value::Kind::kStr || pid.items[3]->kind != Value::Kind::kStr ||
        pid.items[4]->kind != Value::Kind::kInt || pid.items[4]->i < 0) {
      return bad("key, location or numel of the wrong type");
    }
    const std::string& key = pid.items[2]->s;
    for (char c : key) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '_')) {
        return bad(absl::StrCat("storage key '", key, "' is not a plain name"));
      }
    }
    TensorRef t;
    t.dtype = *dt;
    t.key = key;
    t.storage_numel = pid.items[4]->i;
    ValuePtr v = Value::object(kStorageRef, {}, false, nullptr);
    v->tensor = std::move(t);
    return v;
  }

  absl::Status step(unsigned char op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        auto v = le(1);
        if (!v.ok()) return v.status();
        if (*v > 2) {
          return err(absl::StrCat("protocol ", *v, " (torch.save writes protocol 2)"));
        }
        return absl::OkStatus();
      }
      case '.':  // STOP
        stopped_ = true;
        return absl::OkStatus();
      case '}':
        stack_.push_back(Value::make_dict());
        return absl::OkStatus();
      case ']':
        stack_.push_back(Value::list());
        return absl::OkStatus();
      case ')':
        stack_.push_back(Value::tuple());
        return absl::OkStatus();
      case '(':
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case 'N':
        stack_.push_back(Value::none());
        return absl::OkStatus();
      case 0x88:
        stack_.push_back(Value::boolean(true));
        return absl::OkStatus();
      case 0x89:
        stack_.push_back(Value::boolean(false));
        return absl::OkStatus();
      case 'J': {
        auto v = le(4);
        if (!v.ok()) return v.status();
        stack_.push_back(Value::integer(static_cast<int32_t>(static_cast<uint32_t>(*v))));
        return absl::OkStatus();
      }
      case 'K':
      case 'M': {
        auto v = le(op == 'K' ? 1 : 2);
        if (!v.ok()) return v.status();
        stack_.push_back(Value::integer(static_cast<int64_t>(*v)));
        return absl::OkStatus();
      }
      case 0x8a: {  // LONG1: n bytes, little-endian two's complement
        auto n = le(1);
        if (!n.ok()) return n.status();
        if (*n > 8) return err(absl::StrCat("LONG1 of ", *n, " bytes at byte ", at, " (> int64)"));
        auto v = le(*n);
        if (!v.ok()) return v.status();
        uint64_t x = *v;
        if (*n > 0 && *n < 8 && (x >> (8 * *n - 1)) & 1) x |= ~uint64_t{0} << (8 * *n);
        stack_.push_back(Value::integer(static_cast<int64_t>(x)));
        return absl::OkStatus();
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        auto v = take(8);
        if (!v.ok()) return v.status();
        uint64_t x = 0;
        for (int k = 0; k < 8; ++k) x = (x << 8) | static_cast<unsigned char>((*v)[k]);
        double d;
        std::memcpy(&d, &x, 8);
        stack_.push_back(Value::floating(d));
        return absl::OkStatus();
      }
      case 'X':
      case 'T':
      case 'U': {  // BINUNICODE, BINSTRING, SHORT_BINSTRING
        auto n = le(op == 'U' ? 1 : 4);
        if (!n.ok()) return n.status();
        auto v = take(*n);
        if (!v.ok()) return v.status();
        stack_.push_back(Value::str(std::string(*v)));
        return absl::OkStatus();
      }
      case 't': {
        auto items = pop_mark();
        if (!items.ok()) return items.status();
        stack_.push_back(Value::tuple(std::move(*items)));
        return absl::OkStatus();
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84;
        std::vector<ValuePtr> items(n);
        for (size_t k = n; k-- > 0;) {
          auto v = pop();
          if (!v.ok()) return v.status();
          items[k] = *v;
        }
        stack_.push_back(Value::tuple(std::move(items)));
        return absl::OkStatus();
      }
      case 'a':
      case 'e': {  // APPEND, APPENDS
        std::vector<ValuePtr> items;
        if (op == 'a') {
          auto v = pop();
          if (!v.ok()) return v.status();
          items.push_back(*v);
        } else {
          auto v = pop_mark();
          if (!v.ok()) return v.status();
          items = std::move(*v);
        }
        auto l = top();
        if (!l.ok()) return l.status();
        if ((*l)->kind != Value::Kind::kList) {
          return err(absl::StrCat("APPEND(S) at byte ", at, " on a ", describe(**l)));
        }
        for (ValuePtr& v : items) (*l)->items.push_back(std::move(v));
        return absl::OkStatus();
      }
      case 's':
      case 'u': {  // SETITEM, SETITEMS
        std::vector<ValuePtr> kv;
        if (op == 's') {
          auto v = pop();
          if (!v.ok()) return v.status();
          auto k = pop();
          if (!k.ok()) return k.status();
          kv = {*k, *v};
        } else {
          auto v = pop_mark();
          if (!v.ok()) return v.status();
          kv = std::move(*v);
        }
        auto d = top();
        if (!d.ok()) return d.status();
        return set_items(**d, kv, at);
      }
      case 'c': {  // GLOBAL module\nname\n
        auto mod = line();
        if (!mod.ok()) return mod.status();
        auto name = line();
        if (!name.ok()) return name.status();
        const std::string dotted = absl::StrCat(*mod, ".", *name);
        if (!global_allowed(dotted)) {
          return err(absl::StrCat("GLOBAL ", dotted, " at byte ", at,
                                  " is not one torch.save of a Megatron-DeepSpeed checkpoint "
                                  "writes: refused (pickles are never executed)"));
        }
        stack_.push_back(Value::global(dotted));
        return absl::OkStatus();
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        auto args = pop();
        if (!args.ok()) return args.status();
        auto callable = pop();
        if (!callable.ok()) return callable.status();
        const char* opn = op == 'R' ? "REDUCE" : "NEWOBJ";
        if ((*callable)->kind != Value::Kind::kGlobal || (*args)->kind != Value::Kind::kTuple) {
          return err(absl::StrCat(opn, " at byte ", at, " of a ", describe(**callable), " on a ",
                                  describe(**args)));
        }
        const std::string& g = (*callable)->s;
        if (g == kRebuildTensor) {
          if (op != 'R') return err(absl::StrCat("NEWOBJ of ", g));
          auto t = rebuild_tensor(**args);
          if (!t.ok()) return t.status();
          stack_.push_back(*t);
        } else if (absl::EndsWith(g, ".getattr") &&
                   ((*args)->items.size() != 2 || (*args)->items[0]->kind != Value::Kind::kGlobal ||
                    (*args)->items[1]->kind != Value::Kind::kStr)) {
          return err(absl::StrCat(opn, " of ", g, " at byte ", at,
                                  " on something other than (whitelisted class, name)"));
        } else if (g == "collections.OrderedDict") {
          if (!(*args)->items.empty()) return err("OrderedDict with constructor arguments");
          stack_.push_back(Value::make_dict(true));
        } else {
          stack_.push_back(Value::object(g, (*args)->items, op == 0x81, nullptr));
        }
        return absl::OkStatus();
      }
      case 'b': {  // BUILD: obj.__setstate__(state), recorded
        auto state = pop();
        if (!state.ok()) return state.status();
        auto obj = top();
        if (!obj.ok()) return obj.status();
        if ((*obj)->kind != Value::Kind::kObject || (*obj)->s == kStorageRef) {
          return err(absl::StrCat("BUILD at byte ", at, " on a ", describe(**obj)));
        }
        (*obj)->state = *state;
        return absl::OkStatus();
      }
      case 'Q': {  // BINPERSID
        auto pid = pop();
        if (!pid.ok()) return pid.status();
        auto s = storage_ref(**pid, at);
        if (!s.ok()) return s.status();
        stack_.push_back(*s);
        return absl::OkStatus();
      }
      case 'q':
      case 'r':
      case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
        uint64_t idx = memo_.size();
        if (op != 0x94) {
          auto v = le(op == 'q' ? 1 : 4);
          if (!v.ok()) return v.status();
          idx = *v;
        }
        auto v = top();
        if (!v.ok()) return v.status();
        memo_[idx] = *v;
        return absl::OkStatus();
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        auto idx = le(op == 'h' ? 1 : 4);
        if (!idx.ok()) return idx.status();
        auto it = memo_.find(*idx);
        if (it == memo_.end()) {
          return err(absl::StrCat("memo index ", *idx, " at byte ", at, " was never stored"));
        }
        stack_.push_back(it->second);
        return absl::OkStatus();
      }
      default:
        return err(absl::StrFormat(
            "opcode 0x%02x (%s) at byte %d is not one torch.save writes: refused (pickles are "
            "never executed)",
            op, opcode_name(op), at));
    }
  }

  std::string_view b_;
  const std::string& what_;
  size_t pos_ = 0;
  bool stopped_ = false;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

#define ANVIL_PT_TRY(expr)    \
  do {                        \
    absl::Status _s = (expr); \
    if (!_s.ok()) return _s;  \
  } while (0)

class Writer {
 public:
  absl::Status value(const Value& v) {
    switch (v.kind) {
      case Value::Kind::kNone:
        out_ += 'N';
        return absl::OkStatus();
      case Value::Kind::kBool:
        out_ += v.b ? '\x88' : '\x89';
        return absl::OkStatus();
      case Value::Kind::kInt:
        integer(v.i);
        return absl::OkStatus();
      case Value::Kind::kFloat: {
        uint64_t x;
        std::memcpy(&x, &v.f, 8);
        out_ += 'G';
        for (int k = 7; k >= 0; --k) out_ += static_cast<char>((x >> (8 * k)) & 0xff);
        return absl::OkStatus();
      }
      case Value::Kind::kStr:
        out_ += 'X';
        le(v.s.size(), 4);
        out_ += v.s;
        return absl::OkStatus();
      case Value::Kind::kTuple:
        return tuple(v.items);
      case Value::Kind::kList:
        out_ += ']';
        if (v.items.empty()) return absl::OkStatus();
        if (v.items.size() > 1) out_ += '(';
        for (const ValuePtr& x : v.items) ANVIL_PT_TRY(value(*x));
        out_ += v.items.size() > 1 ? 'e' : 'a';
        return absl::OkStatus();
      case Value::Kind::kDict:
        if (v.ordered) {
          ANVIL_PT_TRY(global("collections.OrderedDict"));
          out_ += ")R";
        } else {
          out_ += '}';
        }
        if (v.dict.empty()) return absl::OkStatus();
        if (v.dict.size() > 1) out_ += '(';
        for (const auto& [k, x] : v.dict) {
          ANVIL_PT_TRY(value(*k));
          ANVIL_PT_TRY(value(*x));
        }
        out_ += v.dict.size() > 1 ? 'u' : 's';
        return absl::OkStatus();
      case Value::Kind::kTensor:
        return tensor(v.tensor);
      case Value::Kind::kGlobal:
        return global(v.s);
      case Value::Kind::kObject:
        if (v.s == kStorageRef) return absl::InvalidArgumentError("a bare storage reference");
        ANVIL_PT_TRY(global(v.s));
        ANVIL_PT_TRY(tuple(v.items));
        out_ += v.newobj ? '\x81' : 'R';
        if (v.state) {
          ANVIL_PT_TRY(value(*v.state));
          out_ += 'b';
        }
        return absl::OkStatus();
    }
    return absl::InternalError("unknown value kind");
  }

  std::string take() { return std::move(out_); }

 private:
  void le(uint64_t x, int n) {
    for (int k = 0; k < n; ++k) out_ += static_cast<char>((x >> (8 * k)) & 0xff);
  }
  // Python's choice: BININT1, BININT2, BININT, else LONG1 with the fewest bytes.
  void integer(int64_t i) {
    if (i >= 0 && i < 256) {
      out_ += 'K';
      le(i, 1);
    } else if (i >= 0 && i < 65536) {
      out_ += 'M';
      le(i, 2);
    } else if (i >= INT32_MIN && i <= INT32_MAX) {
      out_ += 'J';
      le(static_cast<uint32_t>(static_cast<int32_t>(i)), 4);
    } else {
      int n = 1;
      while (n < 8) {
        const int64_t lo = -(int64_t{1} << (8 * n - 1)), hi = (int64_t{1} << (8 * n - 1)) - 1;
        if (i >= lo && i <= hi) break;
        ++n;
      }
      out_ += '\x8a';
      le(n, 1);
      le(static_cast<uint64_t>(i), n);
    }
  }
  absl::Status tuple(const std::vector<ValuePtr>& items) {
    if (items.empty()) {
      out_ += ')';
      return absl::OkStatus();
    }
    if (items.size() > 3) out_ += '(';
    for (const ValuePtr& x : items) ANVIL_PT_TRY(value(*x));
    out_ += items.size() > 3 ? 't' : static_cast<char>(0x84 + items.size());
    return absl::OkStatus();
  }
  absl::Status global(const std::string& dotted) {
    const size_t dot = dotted.rfind('.');
    if (dot == std::string::npos || !global_allowed(dotted)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GLOBAL ", dotted, " is outside the torch.save subset this writer emits"));
    }
    out_ += 'c';
    out_ += dotted.substr(0, dot) + "\n" + dotted.substr(dot + 1) + "\n";
    return absl::OkStatus();
  }
  absl::Status tensor(const TensorRef& t) {
    ANVIL_PT_TRY(global(kRebuildTensor));
    out_ += "((";
    ANVIL_PT_TRY(value(*Value::str("storage")));
    out_ += absl::StrCat("ctorch\n", dtype_storage_class(t.dtype), "\n");
    ANVIL_PT_TRY(value(*Value::str(t.key)));
    ANVIL_PT_TRY(value(*Value::str("cpu")));
    integer(t.storage_numel);
    out_ += "tQ";
    integer(t.offset);
    std::vector<ValuePtr> size, stride;
    for (int64_t d : t.shape) size.push_back(Value::integer(d));
    for (int64_t d : t.stride) stride.push_back(Value::integer(d));
    ANVIL_PT_TRY(tuple(size));
    ANVIL_PT_TRY(tuple(stride));
    out_ += t.requires_grad ? '\x88' : '\x89';
    ANVIL_PT_TRY(global("collections.OrderedDict"));
    out_ += ")Rt";
    out_ += 'R';
    return absl::OkStatus();
  }

  std::string out_;
};

#undef ANVIL_PT_TRY

}  // namespace

bool global_allowed(const std::string& dotted) {
  for (const char* g : kAllowedGlobals) {
    if (dotted == g) return true;
  }
  if (absl::StartsWith(dotted, "torch.") && dotted.find('.', 6) == std::string::npos) {
    return dtype_of_storage_class(dotted.substr(6)).ok();
  }
  return false;
}

absl::StatusOr<ValuePtr> read_pickle(std::string_view bytes, const std::string& what) {
  return Reader(bytes, what).run();
}

absl::StatusOr<std::string> write_pickle(const Value& root) {
  Writer w;
  std::string out = "\x80\x02";
  absl::Status s = w.value(root);
  if (!s.ok()) return s;
  out += w.take();
  out += '.';
  return out;
}

}  // namespace anvil::io::torch_pt
