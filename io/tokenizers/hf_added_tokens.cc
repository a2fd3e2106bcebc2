// Added-token matching of Hugging Face tokenizers (io/tokenizers/hf_added_tokens.h).
#include "io/tokenizers/hf_added_tokens.h"

#include <algorithm>
#include <utility>

#include "io/tokenizers/hf_pattern.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

// Rust regex's \w, which tokenizers' single_word test uses.
bool is_word_char(char32_t cp) { return is_rust_word_char(cp); }

// The last code point of text[0, end) (end > 0).
char32_t last_code_point(absl::string_view text, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return utf8::decode_at(text, b).cp;
}

}  // namespace

void AddedMatcher::add(std::string pattern, const AddedToken* token) {
  if (pattern.empty()) return;
  patterns_.push_back({std::move(pattern), token});
}

void AddedMatcher::finish() {
  for (size_t i = 0; i < patterns_.size(); ++i) {
    by_first_[static_cast<unsigned char>(patterns_[i].text[0])].push_back(static_cast<int>(i));
  }
  for (auto& list : by_first_) {  // longest first: the first hit at a position is the longest
    std::stable_sort(list.begin(), list.end(), [this](int a, int b) {
      return patterns_[a].text.size() > patterns_[b].text.size();
    });
  }
}

void AddedMatcher::split(absl::string_view text, std::vector<Segment>* out) const {
  size_t start_offset = 0;  // end of the last emitted segment
  size_t search = 0;
  while (search < text.size()) {
    size_t mstart = 0;
    const Pattern* p = find(text, search, &mstart);
    if (p == nullptr) break;
    size_t start = mstart;
    size_t stop = mstart + p->text.size();
    search = stop;
    const AddedToken& t = *p->token;
    if (t.single_word) {
      const bool start_ok = start == 0 || !is_word_char(last_code_point(text, start));
      const bool stop_ok = stop == text.size() || !is_word_char(utf8::decode_at(text, stop).cp);
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {  // swallow the whitespace before it, not past the previous segment
      size_t s = start;
      while (s > start_offset) {
        size_t b = s - 1;
        while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        if (!utf8::is_white_space(utf8::decode_at(text, b).cp)) break;
        s = b;
      }
      start = s;
    }
    if (t.rstrip) {  // swallow the whitespace after it
      while (stop < text.size()) {
        const utf8::Decoded d = utf8::decode_at(text, stop);
        if (!utf8::is_white_space(d.cp)) break;
        stop += d.length;
      }
      search = stop;
    }
    if (start_offset < start) out->push_back({start_offset, start, -1});
    out->push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size() || text.empty()) out->push_back({start_offset, text.size(), -1});
}

const AddedMatcher::Pattern* AddedMatcher::find(absl::string_view text, size_t from,
                                                size_t* at) const {
  for (size_t i = from; i < text.size(); ++i) {
    const auto& list = by_first_[static_cast<unsigned char>(text[i])];
    for (const int k : list) {
      const std::string& p = patterns_[k].text;
      if (text.size() - i >= p.size() && text.compare(i, p.size(), p) == 0) {
        *at = i;
        return &patterns_[k];
      }
    }
  }
  return nullptr;
}

}  // namespace anvil::io::hf_internal
