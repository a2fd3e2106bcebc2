// Normalizers and per-token decoders of Hugging Face tokenizers (io/tokenizers/hf_text_steps.h).
#include "io/tokenizers/hf_text_steps.h"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "absl/strings/str_replace.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

// byte_to_cp[b]: the printable stand-in of byte b (GPT-2's bytes_to_unicode).
struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_cp{};
  std::unordered_map<char32_t, uint8_t> cp_to_byte;
  ByteAlphabet() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet* alphabet = new ByteAlphabet();
  return *alphabet;
}

}  // namespace

std::string apply_normalizers(const std::vector<NormStep>& steps, absl::string_view text) {
  std::string cur(text);
  std::string next;
  for (const NormStep& s : steps) {
    switch (s.kind) {
      case NormKind::kBert:
        bert_normalize(cur, s.bert, &next);
        cur.swap(next);
        break;
      case NormKind::kNfc:
        cur = utf8::normalize(cur, utf8::NormalForm::kNFC);
        break;
      case NormKind::kNfd:
        cur = utf8::normalize(cur, utf8::NormalForm::kNFD);
        break;
      case NormKind::kNfkc:
        cur = utf8::normalize(cur, utf8::NormalForm::kNFKC);
        break;
      case NormKind::kNfkd:
        cur = utf8::normalize(cur, utf8::NormalForm::kNFKD);
        break;
      case NormKind::kLowercase:
        next.clear();
        for (size_t pos = 0; pos < cur.size();) {
          const utf8::Decoded d = utf8::decode_at(cur, pos);
          append_lowercase(d.cp, &next);
          pos += d.length;
        }
        cur.swap(next);
        break;
    }
  }
  return cur;
}

void append_byte_level(const std::string& token, std::string* out) {
  const ByteAlphabet& a = byte_alphabet();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const utf8::Decoded d = utf8::decode_at(token, pos);
    const auto it = a.cp_to_byte.find(d.cp);
    if (!d.valid || it == a.cp_to_byte.end()) {
      *out += token;
      return;
    }
    bytes.push_back(static_cast<char>(it->second));
    pos += d.length;
  }
  *out += bytes;
}

std::string wordpiece_cleanup(const std::string& token) {
  return absl::StrReplaceAll(token, {{" .", "."},
                                     {" ?", "?"},
                                     {" !", "!"},
                                     {" ,", ","},
                                     {" ' ", "'"},
                                     {" n't", "n't"},
                                     {" 'm", "'m"},
                                     {" do not", " don't"},
                                     {" 's", "'s"},
                                     {" 've", "'ve"},
                                     {" 're", "'re"}});
}

}  // namespace anvil::io::hf_internal
