// Added-token matching of Hugging Face tokenizers (io/tokenizers/hf_added_tokens.h).
#include "io/tokenizers/hf_added_tokens.h"

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
  edges_.clear();
  terminal_.assign(1, -1);
  starts_.fill(false);
  for (size_t i = 0; i < patterns_.size(); ++i) {
    int32_t node = 0;
    for (const char c : patterns_[i].text) {
      const uint64_t key = static_cast<uint64_t>(node) << 8 | static_cast<unsigned char>(c);
      const auto it = edges_.find(key);
      if (it != edges_.end()) {
        node = it->second;
      } else {
        terminal_.push_back(-1);
        node = static_cast<int32_t>(terminal_.size() - 1);
        edges_.emplace(key, node);
      }
    }
    if (terminal_[node] < 0) terminal_[node] = static_cast<int32_t>(i);  // the first one wins
    starts_[static_cast<unsigned char>(patterns_[i].text[0])] = true;
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
    if (!starts_[static_cast<unsigned char>(text[i])]) continue;
    int32_t node = 0;
    int32_t longest = -1;
    for (size_t j = i; j < text.size(); ++j) {
      const uint64_t key = static_cast<uint64_t>(node) << 8 | static_cast<unsigned char>(text[j]);
      const auto it = edges_.find(key);
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[node] >= 0) longest = terminal_[node];
    }
    if (longest >= 0) {
      *at = i;
      return &patterns_[longest];
    }
  }
  return nullptr;
}

}  // namespace anvil::io::hf_internal
