// clean_text and pair_tokens (see task_text.h).
#include "io/task_text.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"

namespace anvil::io {

std::string clean_text(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_space = false;
  for (char c : text) {  // "\n" -> " " and re.sub(r'\s+', ' ') in one pass
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      if (!in_space) out.push_back(' ');
      in_space = true;
    } else {
      out.push_back(c);
      in_space = false;
    }
  }
  for (int i = 0; i < 3; ++i) absl::StrReplaceAll({{" . ", ". "}}, &out);
  return out;
}

std::vector<int32_t> pair_tokens(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                 int64_t max_len, int32_t sep) {
  std::vector<int32_t> ids(a);
  if (!b.empty()) {
    ids.push_back(sep);
    ids.insert(ids.end(), b.begin(), b.end());
  }
  if (static_cast<int64_t>(ids.size()) >= max_len) ids.resize(static_cast<size_t>(max_len - 1));
  ids.push_back(sep);
  return ids;
}

TokenTypes bert_pair_tokens(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                            bool has_b, int64_t max_len, int32_t cls, int32_t sep) {
  TokenTypes t;
  t.ids.push_back(cls);
  t.ids.insert(t.ids.end(), a.begin(), a.end());
  t.ids.push_back(sep);
  t.types.assign(t.ids.size(), 0);
  if (has_b) {
    t.ids.insert(t.ids.end(), b.begin(), b.end());
    t.types.resize(t.ids.size(), 1);
  }
  const bool trimmed = static_cast<int64_t>(t.ids.size()) >= max_len;
  if (trimmed) {
    t.ids.resize(static_cast<size_t>(max_len - 1));
    t.types.resize(static_cast<size_t>(max_len - 1));
  }
  if (has_b || trimmed) {
    t.ids.push_back(sep);
    t.types.push_back(has_b ? 1 : 0);
  }
  return t;
}

}  // namespace anvil::io
