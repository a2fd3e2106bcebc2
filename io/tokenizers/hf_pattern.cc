// Literal and Oniguruma patterns of tokenizer.json (io/tokenizers/hf_pattern.h).
#include "io/tokenizers/hf_pattern.h"

#include <oniguruma.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

// onig_initialize must run once per process before the first onig_new.
void init_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

}  // namespace

bool is_rust_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  const utf8::Category c = utf8::category(cp);
  return utf8::is_letter(c) || utf8::is_mark(c) || c == utf8::Category::kNd ||
         c == utf8::Category::kNl || c == utf8::Category::kPc;
}

absl::StatusOr<std::unique_ptr<HfPattern>> HfPattern::create(const Ctx& ctx,
                                                             const PatternSpec& spec,
                                                             const std::string& where) {
  std::unique_ptr<HfPattern> p(new HfPattern());
  if (!spec.is_regex && !spec.text.empty()) {
    p->literal_ = spec.text;
    return p;
  }
  init_oniguruma();
  regex_t* reg = nullptr;
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(spec.text.data());
  // tokenizers: onig::Regex::new, i.e. no options and the default (Oniguruma) syntax.
  const int rc = onig_new(&reg, begin, begin + spec.text.size(), ONIG_OPTION_NONE,
                          ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return ctx.bad(where, absl::StrCat("regex '", spec.text, "' does not compile (Oniguruma: ",
                                       reinterpret_cast<const char*>(message), ")"));
  }
  p->regex_ = reg;
  return p;
}

HfPattern::~HfPattern() {
  if (regex_ != nullptr) onig_free(static_cast<regex_t*>(regex_));
}

namespace {

// onig_scan's callback state: the tiling so far.
struct ScanState {
  std::vector<PatternMatch>* out;
  size_t prev = 0;  // end of the tiling so far
  bool have_last = false;
  size_t last_match_end = 0;
};

// onig_scan reports the matches of successive searches, stepping one character after an empty
// match at the search start; the onig crate's find_iter does the same except that it drops an
// empty match ending where the previous accepted match ended, which is filtered here.
int on_match(int /*count*/, int /*at*/, OnigRegion* region, void* arg) {
  auto* st = static_cast<ScanState*>(arg);
  const size_t b = static_cast<size_t>(region->beg[0]);
  const size_t e = static_cast<size_t>(region->end[0]);
  if (b == e && st->have_last && st->last_match_end == e) return 0;
  st->have_last = true;
  st->last_match_end = e;
  if (st->prev != b) st->out->push_back({st->prev, b, false});
  st->out->push_back({b, e, true});
  st->prev = e;
  return 0;
}

}  // namespace

void HfPattern::find_matches(absl::string_view text, std::vector<PatternMatch>* out) const {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return;
  }
  size_t prev = 0;  // end of the tiling so far
  if (regex_ == nullptr) {
    for (size_t at = text.find(literal_); at != absl::string_view::npos;
         at = text.find(literal_, prev)) {
      if (prev != at) out->push_back({prev, at, false});
      out->push_back({at, at + literal_.size(), true});
      prev = at + literal_.size();
    }
  } else {
    ScanState st;
    st.out = out;
    const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
    OnigRegion region;
    onig_region_init(&region);
    onig_scan(static_cast<regex_t*>(regex_), str, str + text.size(), &region, ONIG_OPTION_NONE,
              on_match, &st);
    onig_region_free(&region, /*free_self=*/0);
    prev = st.prev;
  }
  if (prev != text.size()) out->push_back({prev, text.size(), false});
}

}  // namespace anvil::io::hf_internal
