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

}  // namespace anvil::io
