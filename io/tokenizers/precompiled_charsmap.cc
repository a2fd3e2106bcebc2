// SentencePiece's precompiled charsmap as tokenizers applies it
// (io/tokenizers/precompiled_charsmap.h).
#include "io/tokenizers/precompiled_charsmap.h"

#include <utf8proc.h>

#include <cstring>

#include "io/tokenizers/hf_utf8.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

// Darts-clone unit fields (spm_precompiled's DoubleArray).
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t value(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
size_t offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

absl::StatusOr<std::unique_ptr<PrecompiledCharsmap>> PrecompiledCharsmap::create(std::string blob) {
  if (blob.size() < 4) return absl::InvalidArgumentError("precompiled_charsmap is truncated");
  uint32_t trie_bytes = 0;
  for (int i = 3; i >= 0; --i) trie_bytes = trie_bytes << 8 | static_cast<unsigned char>(blob[i]);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || blob.size() - 4 < trie_bytes) {
    return absl::InvalidArgumentError("precompiled_charsmap has an invalid trie size");
  }
  std::unique_ptr<PrecompiledCharsmap> m(new PrecompiledCharsmap());
  m->units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < m->units_.size(); ++i) {
    uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = u << 8 | static_cast<unsigned char>(blob[4 + 4 * i + k]);
    m->units_[i] = u;
  }
  m->normalized_ = blob.substr(4 + trie_bytes);
  // Every reachable unit index and replacement offset must be in range; checked lazily in
  // transform() (an out-of-range index ends the search as a mismatch).
  return m;
}

bool PrecompiledCharsmap::transform(absl::string_view chunk, absl::string_view* out) const {
  size_t node = 0;
  if (units_.empty()) return false;
  node ^= offset(units_[node]);
  for (const char ch : chunk) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size()) return false;
    const uint32_t unit = units_[node];
    if (label(unit) != c) return false;
    node ^= offset(unit);
    if (node >= units_.size()) return false;
    if (has_leaf(unit)) {  // the first (shortest) key wins, as in spm_precompiled
      const size_t begin = value(units_[node]);
      if (begin > normalized_.size()) return false;
      size_t end = begin;
      while (end < normalized_.size() && normalized_[end] != '\0') ++end;
      *out = absl::string_view(normalized_).substr(begin, end - begin);
      return true;
    }
  }
  return false;
}

void PrecompiledCharsmap::normalize(std::string* text) const {
  const std::string in = std::move(*text);
  std::string out;
  out.reserve(in.size());
  const absl::string_view view(in);
  utf8proc_int32_t state = 0;
  size_t cluster = 0;
  char32_t prev = 0;
  auto flush = [&](size_t end) {
    const absl::string_view g = view.substr(cluster, end - cluster);
    absl::string_view rep;
    if (g.size() < 6 && transform(g, &rep)) {
      out.append(rep.data(), rep.size());
      return;
    }
    for (size_t p = 0; p < g.size();) {
      const utf8::Decoded d = decode_utf8(g, p);
      const absl::string_view part = g.substr(p, d.length);
      if (transform(part, &rep)) {
        out.append(rep.data(), rep.size());
      } else {
        out.append(part.data(), part.size());
      }
      p += d.length;
    }
  };
  for (size_t pos = 0; pos < view.size();) {
    const utf8::Decoded d = decode_utf8(view, pos);
    if (pos > 0 && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev),
                                                    static_cast<utf8proc_int32_t>(d.cp), &state)) {
      flush(pos);
      cluster = pos;
    }
    prev = d.cp;
    pos += d.length;
  }
  if (cluster < view.size()) flush(view.size());
  *text = std::move(out);
}

}  // namespace anvil::io::hf_internal
