// GPT-2's byte alphabet (io/tokenizers/hf_byte_level.h).
#include "io/tokenizers/hf_byte_level.h"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

// byte_to_cp[b]: the printable stand-in of byte b (GPT-2's bytes_to_unicode), and its UTF-8.
struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8;
  std::unordered_map<char32_t, uint8_t> cp_to_byte;
  ByteAlphabet() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      byte_to_cp[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);
      utf8::append(byte_to_cp[b], &byte_to_utf8[b]);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet* alphabet = new ByteAlphabet();
  return *alphabet;
}

}  // namespace

void append_to_byte_level(absl::string_view bytes, std::string* out) {
  const ByteAlphabet& a = byte_alphabet();
  for (const char c : bytes) out->append(a.byte_to_utf8[static_cast<unsigned char>(c)]);
}

std::string to_byte_level(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  append_to_byte_level(bytes, &out);
  return out;
}

void append_byte_level(absl::string_view token, std::string* out) {
  const ByteAlphabet& a = byte_alphabet();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const utf8::Decoded d = utf8::decode_at(token, pos);
    const auto it = a.cp_to_byte.find(d.cp);
    if (!d.valid || it == a.cp_to_byte.end()) {
      out->append(token.data(), token.size());
      return;
    }
    bytes.push_back(static_cast<char>(it->second));
    pos += d.length;
  }
  *out += bytes;
}

}  // namespace anvil::io::hf_internal
