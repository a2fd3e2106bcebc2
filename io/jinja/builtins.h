// The built-in filters, tests, attribute methods and global functions of the Jinja subset,
// with @huggingface/jinja's behaviour (io/jinja/template.h lists them). Each throws
// jinja::Error (line 0: the evaluator adds the line) for an unknown name or a wrong type.
#pragma once

#include <string>

#include "io/jinja/value.h"

namespace anvil::io::jinja {

// `operand | name` (has_args false) or `operand | name(args)`.
Value apply_filter(const std::string& name, const Value& operand, bool has_args, const Args& args);
// `operand is name`; `value`: the second operand of equalto / eq (selectattr's third argument),
// null where none is given (those two tests then fail).
bool apply_test(const std::string& name, const Value& operand, const Value* value = nullptr);
// `object.key` / `object[key]`: dict entries, list and string items (negative: from the end),
// and the methods of strings (strip, split, startswith...) and dicts (get, items, keys,
// values); undefined when absent.
Value member(const Value& object, const Value& key);
// Slicing of a list or a string (Python's start:stop:step; undefined: absent).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The global names: true/false/none (and True/False/None), namespace(), raise_exception(),
// range(), strftime_now().
Dict globals();
// The length that JavaScript gives a UTF-8 string (UTF-16 code units).
int64_t js_length(const std::string& s);

}  // namespace anvil::io::jinja
