// GPT-2 byte-level BPE: vocabulary/merges loading with located errors, the pre-tokenization
// scanner (GPT-2's regex, hand-written), rank-ordered merges (scan or heap), the per-thread
// word cache, and the factory make_gpt2_tokenizer.
#include "io/tokenizers/gpt2_bpe.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/tokenizers/factories.h"
#include "io/tokenizers/utf8.h"
#include "nlohmann/json.hpp"

namespace anvil::io {
namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kEmptyKey = std::numeric_limits<uint64_t>::max();
// Ids above this are rejected as corrupt (a real vocabulary is far smaller; this bounds the
// allocation a bad file can cause).
constexpr uint64_t kMaxTokenId = (uint64_t{1} << 24) - 1;
// kAuto uses the O(n^2) scan up to this many bytes, the heap beyond.
constexpr size_t kScanMaxBytes = 256;

// ---- GPT-2's byte <-> unicode alphabet --------------------------------------------------------
// Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves; the other 68 bytes
// map, in increasing order, to U+0100..U+0143 (bytes_to_unicode() in GPT-2's encoder.py).
struct ByteAlphabet {
  char32_t byte_to_cp[256];
  int16_t cp_to_byte[0x144];  // -1: not in the alphabet

  ByteAlphabet() {
    std::fill(std::begin(cp_to_byte), std::end(cp_to_byte), int16_t{-1});
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// ---- hashing ----------------------------------------------------------------------------------

uint64_t mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h;
}

// A fast hash of short byte strings (8 bytes per step).
uint64_t hash_bytes(absl::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = mix(h ^ w) * 0xff51afd7ed558ccdull;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = mix(h ^ w) * 0xc4ceb9fe1a85ec53ull;
  }
  return mix(h);
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

size_t next_pow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// ---- per-thread word cache --------------------------------------------------------------------

// Piece bytes -> merged ids, open addressing over arenas. Bounded: once it holds max_words
// entries the next insert empties it (common words come back at once; the rare misses pay one
// BPE each), so memory never grows with the corpus, unlike Megatron's unbounded dict cache.
class WordCache {
 public:
  explicit WordCache(size_t max_words)
      : max_words_(std::max<size_t>(max_words, 1)), slots_(next_pow2(2 * max_words_)) {
    mask_ = slots_.size() - 1;
  }

  // Appends the cached ids of `word` to *out; false on a miss.
  bool find(absl::string_view word, uint64_t hash, std::vector<int32_t>* out) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return false;
      if (s.hash == hash && s.key_len == word.size() &&
          std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
        out->insert(out->end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.n_ids);
        return true;
      }
    }
  }

  // Requires 0 < word.size() <= 0xFFFF, n_ids <= 0xFFFF and `word` absent.
  void insert(absl::string_view word, uint64_t hash, const int32_t* ids, size_t n_ids) {
    if (size_ >= max_words_) clear();
    size_t i = hash & mask_;
    while (slots_[i].key_len != 0) i = (i + 1) & mask_;
    Slot& s = slots_[i];
    s.hash = hash;
    s.key_off = static_cast<uint32_t>(keys_.size());
    s.ids_off = static_cast<uint32_t>(ids_.size());
    s.key_len = static_cast<uint16_t>(word.size());
    s.n_ids = static_cast<uint16_t>(n_ids);
    keys_.append(word.data(), word.size());
    ids_.insert(ids_.end(), ids, ids + n_ids);
    ++size_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0;
    uint32_t ids_off = 0;
    uint16_t key_len = 0;  // 0 = free (pieces are never empty)
    uint16_t n_ids = 0;
  };

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    size_ = 0;
  }

  size_t max_words_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
};

// The calling thread's cache for tokenizer `serial`. Each thread keeps the caches of its 4 most
// recently used tokenizers (a destroyed tokenizer's cache is dropped when it falls off the
// list or the thread exits); serial numbers are never reused, so a new tokenizer at a recycled
// address never sees stale entries.
WordCache& thread_cache(uint64_t serial, size_t max_words) {
  constexpr size_t kMaxCachesPerThread = 4;
  struct Entry {
    uint64_t serial;
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::vector<Entry> caches;  // most recently used first
  if (!caches.empty() && caches.front().serial == serial) return *caches.front().cache;
  for (size_t i = 1; i < caches.size(); ++i) {
    if (caches[i].serial == serial) {
      std::rotate(caches.begin(), caches.begin() + i, caches.begin() + i + 1);
      return *caches.front().cache;
    }
  }
  if (caches.size() == kMaxCachesPerThread) caches.pop_back();
  caches.insert(caches.begin(), Entry{serial, std::make_unique<WordCache>(max_words)});
  return *caches.front().cache;
}

std::atomic<uint64_t> next_serial{1};

// ---- file reading and located errors ----------------------------------------------------------

absl::StatusOr<std::string> read_whole_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    return absl::NotFoundError(absl::StrCat("GPT-2 BPE ", what, ": cannot open '", path, "'"));
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) {
    return absl::DataLossError(absl::StrCat("GPT-2 BPE ", what, ": error reading '", path, "'"));
  }
  return ss.str();
}

// "name:line:col" of byte offset `pos` in `text` (1-based line and column).
std::string location(const std::string& name, absl::string_view text, size_t pos) {
  pos = std::min(pos, text.size());
  const absl::string_view before = text.substr(0, pos);
  const size_t line = 1 + std::count(before.begin(), before.end(), '\n');
  const size_t nl = before.rfind('\n');
  const size_t col = nl == absl::string_view::npos ? pos + 1 : pos - nl;
  return absl::StrCat(name, ":", line, ":", col);
}

// ---- encoder.json via nlohmann's SAX interface --------------------------------------------------

// An input iterator over the JSON text that publishes how far the parser has read, so semantic
// errors (found in SAX callbacks, which get no position) can name the line.
class TrackedIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedIterator(const char* p, const char** cursor) : p_(p), cursor_(cursor) {}
  reference operator*() const { return *p_; }
  TrackedIterator& operator++() {
    *cursor_ = ++p_;
    return *this;
  }
  TrackedIterator operator++(int) {
    TrackedIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackedIterator& o) const { return p_ == o.p_; }
  bool operator!=(const TrackedIterator& o) const { return p_ != o.p_; }

 private:
  const char* p_;
  const char** cursor_;
};

// Collects {"token": id} pairs; any other shape stops the parse with a located error.
class VocabSax {
 public:
  using json = nlohmann::json;

  VocabSax(absl::string_view text, const std::string& name, const char* const* cursor)
      : text_(text), name_(name), cursor_(cursor) {}

  bool null() { return fail("null instead of a token id"); }
  bool boolean(bool) { return fail("a boolean instead of a token id"); }
  bool number_integer(json::number_integer_t v) {
    if (v < 0) return fail(absl::StrCat("negative token id ", v));
    return add(static_cast<uint64_t>(v));
  }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t, const json::string_t& s) {
    return fail(absl::StrCat("non-integer token id ", s));
  }
  bool string(json::string_t&) { return fail("a string instead of a token id"); }
  bool binary(json::binary_t&) { return fail("binary data instead of a token id"); }
  bool start_object(std::size_t) {
    if (depth_++ > 0) return fail("a nested object instead of a token id");
    saw_object_ = true;
    return true;
  }
  bool key(json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    return fail(depth_ == 0 ? "expected a JSON object {\"token\": id, ...}, found an array"
                            : "an array instead of a token id");
  }
  bool end_array() { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann counts characters read; the offending one is the last of them.
    error_ = absl::InvalidArgumentError(absl::StrCat(
        location(name_, text_, position > 0 ? position - 1 : 0), ": invalid JSON: ", e.what()));
    return false;
  }

  // Called after the parse: a top-level scalar is an error too.
  absl::Status finish(bool parsed) {
    if (!error_.ok()) return error_;
    if (!parsed) return absl::InvalidArgumentError(absl::StrCat(name_, ": invalid JSON"));
    if (!saw_object_) {
      return absl::InvalidArgumentError(
          absl::StrCat(name_, ": expected a JSON object {\"token\": id, ...}"));
    }
    return absl::OkStatus();
  }

  std::vector<std::pair<std::string, int32_t>>& entries() { return entries_; }
  // Byte offset (in the JSON text) just after each entry's id, for later error messages.
  const std::vector<size_t>& offsets() const { return offsets_; }

 private:
  size_t pos() const { return static_cast<size_t>(*cursor_ - text_.data()); }

  bool fail(const std::string& what) {
    if (depth_ == 0) {
      error_ = absl::InvalidArgumentError(absl::StrCat(
          location(name_, text_, pos()), ": expected a JSON object {\"token\": id, ...}"));
    } else {
      error_ = absl::InvalidArgumentError(
          absl::StrCat(location(name_, text_, pos()), ": token \"", key_, "\": ", what));
    }
    return false;
  }

  bool add(uint64_t id) {
    if (depth_ != 1) return fail("a token id outside the top-level object");
    if (id > kMaxTokenId) return fail(absl::StrCat("token id ", id, " is out of range"));
    entries_.emplace_back(key_, static_cast<int32_t>(id));
    offsets_.push_back(pos());
    return true;
  }

  absl::string_view text_;
  const std::string& name_;
  const char* const* cursor_;
  int depth_ = 0;
  bool saw_object_ = false;
  std::string key_;
  std::vector<std::pair<std::string, int32_t>> entries_;
  std::vector<size_t> offsets_;
  absl::Status error_;
};

}  // namespace

// ---- pre-tokenization ---------------------------------------------------------------------------

namespace {

// Class and byte length of the code point at text[pos] (ill-formed bytes count as U+FFFD,
// class other).
inline utf8::CharClass class_at(absl::string_view text, size_t pos, int* len) {
  const auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) {
    *len = 1;
    return utf8::detail::kAsciiCharClass[b];
  }
  const utf8::Decoded d = utf8::decode_at(text, pos);
  *len = d.length;
  return utf8::detail::non_ascii_char_class(d.cp);
}

}  // namespace

bool Gpt2PreTokenizer::next(absl::string_view* piece) {
  using utf8::CharClass;
  const size_t n = text_.size();
  if (pos_ >= n) return false;
  const size_t start = pos_;
  const char* s = text_.data();

  // 's|'t|'re|'ve|'m|'ll|'d (lowercase only, taken before any other alternative).
  if (s[start] == '\'' && start + 1 < n) {
    const char c1 = s[start + 1];
    size_t len = 0;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
      len = 2;
    } else if (start + 2 < n) {
      const char c2 = s[start + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
        len = 3;
      }
    }
    if (len > 0) {
      pos_ = start + len;
      *piece = text_.substr(start, len);
      return true;
    }
  }

  size_t p = start;
  int len;
  CharClass cls = class_at(text_, p, &len);
  // " ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+": an ASCII space joins a following non-space run.
  if (s[p] == ' ' && p + 1 < n) {
    int len2;
    const CharClass cls2 = class_at(text_, p + 1, &len2);
    if (cls2 != CharClass::kSpace) {
      p += 1;
      cls = cls2;
      len = len2;
    }
  }
  if (cls != CharClass::kSpace) {
    // Greedy run of one class (letters, numbers, or "other", which includes apostrophes).
    p += len;
    while (p < n) {
      int l;
      if (class_at(text_, p, &l) != cls) break;
      p += l;
    }
    pos_ = p;
    *piece = text_.substr(start, p - start);
    return true;
  }

  // Whitespace run. "\s+(?!\S)" backtracks to leave the run's last character when a non-space
  // follows (it then starts the next piece, e.g. " word"); a lone whitespace character before
  // a non-space falls through to "\s+". At the end of the text the whole run is one piece.
  size_t last = p;
  p += len;
  while (p < n) {
    int l;
    if (class_at(text_, p, &l) != CharClass::kSpace) break;
    last = p;
    p += l;
  }
  if (p < n && last > start) p = last;
  pos_ = p;
  *piece = text_.substr(start, p - start);
  return true;
}

std::vector<absl::string_view> gpt2_pretokenize(absl::string_view text) {
  std::vector<absl::string_view> pieces;
  Gpt2PreTokenizer splitter(text);
  absl::string_view piece;
  while (splitter.next(&piece)) pieces.push_back(piece);
  return pieces;
}

// ---- loading ------------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::load(
    const std::string& vocab_file, const std::string& merges_file, size_t cache_words) {
  ANVIL_ASSIGN_OR_RETURN(const std::string vocab, read_whole_file(vocab_file, "vocabulary"));
  ANVIL_ASSIGN_OR_RETURN(const std::string merges, read_whole_file(merges_file, "merges"));
  return from_contents(vocab, vocab_file, merges, merges_file, cache_words);
}

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::from_contents(
    absl::string_view vocab_json, const std::string& vocab_name, absl::string_view merges,
    const std::string& merges_name, size_t cache_words) {
  const ByteAlphabet& alpha = alphabet();
  std::unique_ptr<Gpt2BpeTokenizer> tok(new Gpt2BpeTokenizer());
  tok->serial_ = next_serial.fetch_add(1);
  tok->cache_words_ = cache_words;

  // -- vocabulary: token (in the byte alphabet) -> id
  const char* cursor = vocab_json.data();
  VocabSax sax(vocab_json, vocab_name, &cursor);
  const bool parsed = nlohmann::json::sax_parse(
      TrackedIterator(vocab_json.data(), &cursor),
      TrackedIterator(vocab_json.data() + vocab_json.size(), &cursor), &sax);
  ANVIL_RETURN_IF_ERROR(sax.finish(parsed));
  auto& entries = sax.entries();
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(vocab_name, ": the vocabulary is empty"));
  }

  int32_t max_id = 0;
  for (const auto& e : entries) max_id = std::max(max_id, e.second);
  std::vector<std::string> bytes_of(static_cast<size_t>(max_id) + 1);
  tok->token_present_.assign(static_cast<size_t>(max_id) + 1, false);
  std::unordered_map<std::string, int32_t> id_of;  // token in the byte alphabet -> id
  id_of.reserve(entries.size());
  std::fill(std::begin(tok->byte_token_), std::end(tok->byte_token_), -1);
  for (size_t k = 0; k < entries.size(); ++k) {
    const std::string& token = entries[k].first;
    const int32_t id = entries[k].second;
    // Computed only on error: it counts the lines before the entry.
    auto where = [&] { return location(vocab_name, vocab_json, sax.offsets()[k]); };
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where(), ": empty token (id ", id, ")"));
    }
    if (tok->token_present_[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": token \"", token, "\" reuses id ", id));
    }
    if (!id_of.emplace(token, id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": token \"", token, "\" appears twice"));
    }
    tok->token_present_[id] = true;
    // Undo the byte-to-unicode mapping: every character must be one of the 256 stand-ins.
    std::string& raw = bytes_of[id];
    for (size_t pos = 0; pos < token.size();) {
      const utf8::Decoded d = utf8::decode_at(token, pos);
      if (!d.valid || d.cp >= 0x144 || alpha.cp_to_byte[d.cp] < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: token \"%s\" (id %d) has character U+%04X outside GPT-2's byte alphabet", where(),
            token, id, static_cast<uint32_t>(d.cp)));
      }
      raw.push_back(static_cast<char>(alpha.cp_to_byte[d.cp]));
      pos += d.length;
    }
    if (raw.size() == 1) tok->byte_token_[static_cast<unsigned char>(raw[0])] = id;
  }
  for (int b = 0; b < 256; ++b) {
    if (tok->byte_token_[b] < 0) {
      std::string stand_in;
      utf8::append(alpha.byte_to_cp[b], &stand_in);
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: the vocabulary lacks the single-byte token \"%s\" (byte 0x%02X)",
                          vocab_name, stand_in, b));
    }
  }
  tok->token_offsets_.reserve(bytes_of.size() + 1);
  for (const std::string& raw : bytes_of) {
    tok->token_offsets_.push_back(static_cast<uint32_t>(tok->token_data_.size()));
    tok->token_data_ += raw;
  }
  tok->token_offsets_.push_back(static_cast<uint32_t>(tok->token_data_.size()));
  if (const auto it = id_of.find("<|endoftext|>"); it != id_of.end()) {
    tok->special_.eod = it->second;
  }

  // -- merges: "left right" per line, rank = order of appearance
  struct Merge {
    int32_t left, right, merged;
  };
  std::vector<Merge> merge_list;
  size_t line_no = 0;
  for (size_t begin = 0; begin < merges.size();) {
    size_t end = merges.find('\n', begin);
    if (end == absl::string_view::npos) end = merges.size();
    absl::string_view line = merges.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && absl::StartsWith(line, "#version"))) continue;
    const size_t sp = line.find(' ');
    if (sp == absl::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(merges_name, ":", line_no,
                                                     ": expected \"left right\" (two tokens "
                                                     "separated by one space), got \"",
                                                     line, "\""));
    }
    const std::string left(line.substr(0, sp)), right(line.substr(sp + 1));
    const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    if (l == id_of.end() || r == id_of.end()) {
      return absl::InvalidArgumentError(absl::StrCat(merges_name, ":", line_no, ": \"",
                                                     l == id_of.end() ? left : right,
                                                     "\" is not in the vocabulary ", vocab_name));
    }
    if (m == id_of.end()) {
      return absl::InvalidArgumentError(absl::StrCat(merges_name, ":", line_no, ": the merge \"",
                                                     left, right, "\" of \"", line,
                                                     "\" is not in the vocabulary ", vocab_name));
    }
    merge_list.push_back({l->second, r->second, m->second});
  }

  tok->pair_slots_.assign(next_pow2(2 * merge_list.size() + 2), PairSlot{kEmptyKey, 0, 0});
  const size_t mask = tok->pair_slots_.size() - 1;
  for (size_t rank = 0; rank < merge_list.size(); ++rank) {
    const Merge& mg = merge_list[rank];
    const uint64_t key = pair_key(mg.left, mg.right);
    size_t i = mix(key) & mask;
    while (tok->pair_slots_[i].key != kEmptyKey && tok->pair_slots_[i].key != key) {
      i = (i + 1) & mask;
    }
    // A repeated pair takes its last rank, as GPT-2's dict(zip(merges, range(...))) and HF do.
    tok->pair_slots_[i] = PairSlot{key, static_cast<uint32_t>(rank), mg.merged};
  }
  return tok;
}

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

// ---- BPE --------------------------------------------------------------------------------------

bool Gpt2BpeTokenizer::find_merge(int32_t left, int32_t right, uint32_t* rank,
                                  int32_t* merged) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = pair_slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    const PairSlot& s = pair_slots_[i];
    if (s.key == key) {
      *rank = s.rank;
      *merged = s.merged;
      return true;
    }
    if (s.key == kEmptyKey) return false;
  }
}

void Gpt2BpeTokenizer::bpe(absl::string_view piece, std::vector<int32_t>* out,
                           MergeStrategy strategy) const {
  if (piece.empty()) return;
  if (strategy == MergeStrategy::kAuto) {
    strategy = piece.size() <= kScanMaxBytes ? MergeStrategy::kScan : MergeStrategy::kHeap;
  }
  if (strategy == MergeStrategy::kScan) {
    bpe_scan(piece, out);
  } else {
    bpe_heap(piece, out);
  }
}

// Symbols in an array with the rank of each adjacent pair; each step merges the leftmost pair
// of lowest rank, then only the two pairs touching the new symbol are looked up again.
void Gpt2BpeTokenizer::bpe_scan(absl::string_view piece, std::vector<int32_t>* out) const {
  size_t n = piece.size();
  std::vector<int32_t> sym(n);
  for (size_t i = 0; i < n; ++i) sym[i] = byte_token_[static_cast<unsigned char>(piece[i])];
  if (n > 1) {
    std::vector<uint32_t> rank(n - 1);  // rank[i]: pair (sym[i], sym[i+1])
    std::vector<int32_t> merged(n - 1);
    auto look_up = [&](size_t i) {
      if (!find_merge(sym[i], sym[i + 1], &rank[i], &merged[i])) rank[i] = kNoRank;
    };
    for (size_t i = 0; i + 1 < n; ++i) look_up(i);
    while (n > 1) {
      size_t best = 0;
      uint32_t best_rank = kNoRank;
      for (size_t i = 0; i + 1 < n; ++i) {
        if (rank[i] < best_rank) {
          best_rank = rank[i];
          best = i;
        }
      }
      if (best_rank == kNoRank) break;
      sym[best] = merged[best];
      sym.erase(sym.begin() + best + 1);
      rank.erase(rank.begin() + best);
      merged.erase(merged.begin() + best);
      --n;
      if (best > 0) look_up(best - 1);
      if (best + 1 < n) look_up(best);
    }
  }
  out->insert(out->end(), sym.begin(), sym.begin() + n);
}

// Symbols in a doubly linked list, candidate merges in a min-heap ordered by (rank, position);
// a candidate is stale when either symbol has changed since it was pushed (a symbol's id only
// changes by merging into a longer token, so comparing ids detects it).
void Gpt2BpeTokenizer::bpe_heap(absl::string_view piece, std::vector<int32_t>* out) const {
  const size_t n = piece.size();
  std::vector<int32_t> sym(n);
  std::vector<int64_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = byte_token_[static_cast<unsigned char>(piece[i])];
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
  }
  struct Candidate {
    uint32_t rank;
    uint32_t pos;  // left symbol's index
    int32_t left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int64_t i) {
    const int64_t j = next[i];
    uint32_t rank;
    int32_t merged;
    if (j >= 0 && find_merge(sym[i], sym[j], &rank, &merged)) {
      heap.push({rank, static_cast<uint32_t>(i), sym[i], sym[j], merged});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int64_t>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int64_t i = c.pos;
    const int64_t j = next[i];
    if (sym[i] != c.left || j < 0 || sym[j] != c.right) continue;  // stale
    sym[i] = c.merged;
    sym[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    if (prev[i] >= 0) push(prev[i]);
    push(i);
  }
  for (int64_t i = 0; i >= 0; i = next[i]) out->push_back(sym[i]);
}

// ---- encode / decode ----------------------------------------------------------------------------

void Gpt2BpeTokenizer::encode(absl::string_view text, std::vector<int32_t>* out) const {
  std::string storage;
  const absl::string_view valid = utf8::replace_invalid(text, &storage);
  WordCache& cache = thread_cache(serial_, cache_words_);
  Gpt2PreTokenizer splitter(valid);
  absl::string_view piece;
  while (splitter.next(&piece)) {
    if (piece.size() == 1) {  // a single byte is its own token
      out->push_back(byte_token_[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    if (piece.size() > kMaxCachedBytes) {
      bpe(piece, out);
      continue;
    }
    const uint64_t hash = hash_bytes(piece);
    if (cache.find(piece, hash, out)) continue;
    const size_t before = out->size();
    bpe_scan(piece, out);
    cache.insert(piece, hash, out->data() + before, out->size() - before);
  }
}

absl::string_view Gpt2BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !token_present_[id]) return {};
  return absl::string_view(token_data_)
      .substr(token_offsets_[id], token_offsets_[id + 1] - token_offsets_[id]);
}

absl::StatusOr<std::string> Gpt2BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  text.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size() || !token_present_[id]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("GPT2BPE decode: token %d at position %d is not in the vocabulary "
                          "(size %d)",
                          id, i, vocab_size()));
    }
    text.append(token_data_, token_offsets_[id], token_offsets_[id + 1] - token_offsets_[id]);
  }
  return text;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> make_gpt2_tokenizer(const TokenizerOptions& options) {
  if (options.vocab_file.empty() || options.merge_file.empty()) {
    return absl::InvalidArgumentError(
        "GPT2BPE needs a vocabulary file (encoder.json / vocab.json) and a merges file "
        "(vocab.bpe / merges.txt)");
  }
  if (options.vocab_extra_ids != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPT2BPE takes no extra ids (vocab_extra_ids = ", options.vocab_extra_ids,
                     "); they exist for T5's SentencePiece and WordPiece vocabularies"));
  }
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<Gpt2BpeTokenizer> tok,
                         Gpt2BpeTokenizer::load(options.vocab_file, options.merge_file));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace anvil::io
