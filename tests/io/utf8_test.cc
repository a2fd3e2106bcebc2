// io/tokenizers/utf8: decoding with Python's errors="replace" semantics (one U+FFFD per maximal
// ill-formed subpart), checked exhaustively over all 2-byte sequences and over all 3- and
// 4-byte sequences of 25 representative bytes against CRCs computed with CPython; encoding;
// White_Space and the letter/number/space/other classes; normalization.
#include "io/tokenizers/utf8.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::io::utf8 {
namespace {

std::string hex_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// zlib's CRC-32 (the polynomial of Python's zlib.crc32), bitwise.
uint32_t crc32_update(uint32_t crc, const std::string& bytes) {
  crc = ~crc;
  for (const char ch : bytes) {
    crc ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// CRC over every sequence's replace_invalid() output, each prefixed by its length byte, in the
// order of itertools.product(alphabet, repeat=len).
uint32_t crc_of_all(const std::vector<int>& alphabet, int len) {
  uint32_t crc = 0;
  std::vector<size_t> idx(len, 0);
  while (true) {
    std::string in;
    for (int k = 0; k < len; ++k) in.push_back(static_cast<char>(alphabet[idx[k]]));
    const std::string out = replace_invalid(in);
    crc = crc32_update(crc, std::string(1, static_cast<char>(out.size())) + out);
    int k = len - 1;
    while (k >= 0 && ++idx[k] == alphabet.size()) idx[k--] = 0;
    if (k < 0) break;
  }
  return crc;
}

// The expected CRCs below come from CPython 3.11:
//   crc = 0
//   for seq in itertools.product(alphabet, repeat=n):
//       out = bytes(seq).decode("utf-8", "replace").encode("utf-8")
//       crc = zlib.crc32(bytes([len(out)]) + out, crc)
const std::vector<int> kInteresting = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                       0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                       0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};

TEST(Utf8, ReplaceInvalidMatchesPythonOnAllTwoByteSequences) {
  std::vector<int> all(256);
  for (int b = 0; b < 256; ++b) all[b] = b;
  // alphabet = range(256), n = 2.
  EXPECT_EQ(crc_of_all(all, 2), 0x7b49dc12u);
}

TEST(Utf8, ReplaceInvalidMatchesPythonOnRepresentativeThreeAndFourByteSequences) {
  // The 25 bytes cover every boundary of Table 3-7 (ASCII, continuation sub-ranges 80-8F,
  // 90-9F, A0-BF, invalid leads C0 C1 F5 FF, and the leads E0 ED F0 F4 with narrowed ranges).
  EXPECT_EQ(crc_of_all(kInteresting, 3), 0xcd559c01u);
  EXPECT_EQ(crc_of_all(kInteresting, 4), 0x17a8c3d7u);
}

TEST(Utf8, MaximalSubpartsExamples) {
  // Unicode §3.9, Table 3-8: "a F1 80 80 E1 80 C2 b 80 c 80 BF d".
  EXPECT_EQ(replace_invalid(hex_bytes("61F18080E180C262806380BF64")),
            hex_bytes("61efbfbdefbfbdefbfbd62efbfbd63efbfbdefbfbd64"));
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid("truncated \xe6\x97"), "truncated " + r);
  EXPECT_EQ(replace_invalid("\xed\xa0\x80"), r + r + r);  // surrogate: ED then A0 fails
  EXPECT_EQ(replace_invalid("\xc0\xaf"), r + r);          // overlong lead C0 is never valid
  EXPECT_EQ(replace_invalid("\xf0\x9f\x98"
                            "A"),
            r + "A");
  EXPECT_EQ(replace_invalid("\xf4\x90\x80\x80"), r + r + r + r);  // > U+10FFFF
  EXPECT_EQ(replace_invalid("ok \xe6\x97\xa5"), "ok \xe6\x97\xa5");

  const Decoded d = decode_at("\xe6\x97", 0);
  EXPECT_FALSE(d.valid);
  EXPECT_EQ(d.cp, kReplacementChar);
  EXPECT_EQ(d.length, 2);
  const Decoded ok = decode_at("x\xf0\x9f\xa4\x96", 1);
  EXPECT_TRUE(ok.valid);
  EXPECT_EQ(ok.cp, 0x1F916u);
  EXPECT_EQ(ok.length, 4);
}

TEST(Utf8, ValidPrefixAndZeroCopyReplace) {
  EXPECT_EQ(valid_prefix_length("abcdefghijklmnop\xc3\xa9xyz"), 21u);
  EXPECT_EQ(valid_prefix_length("abcdefghijkl\xff"), 12u);
  EXPECT_EQ(valid_prefix_length(""), 0u);
  EXPECT_TRUE(is_valid("na\xc3\xafve \xe6\x97\xa5\xf0\x9f\x9a\x80"));
  EXPECT_FALSE(is_valid("abc\x80"));

  std::string storage;
  const std::string good = "plain text";
  EXPECT_EQ(replace_invalid(good, &storage).data(), good.data());  // no copy
  EXPECT_EQ(std::string(replace_invalid("a\xff", &storage)), "a\xEF\xBF\xBD");
}

TEST(Utf8, EncodeDecodeRoundTripRandomScalarValues) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, kMaxCodePoint);
  for (int trial = 0; trial < 200; ++trial) {
    std::u32string cps;
    for (int k = 0; k < 50; ++k) {
      char32_t cp = any(rng) >> (rng() % 12);  // favour small values
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      cps.push_back(cp);
    }
    const std::string bytes = encode(cps);
    ASSERT_TRUE(is_valid(bytes));
    ASSERT_EQ(decode(bytes), cps);
    size_t total = 0;
    for (const char32_t cp : cps) total += encoded_length(cp);
    EXPECT_EQ(total, bytes.size());
  }
  // Surrogates and out-of-range values are written as U+FFFD.
  EXPECT_EQ(encode(std::u32string{0xD800, 0x110000}), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8, WhiteSpaceIsSeparatorsPlusAsciiControlsAndNel) {
  // White_Space = Zs + Zl + Zp + U+0009..000D + U+0085 (PropList.txt), checked via utf8proc's
  // categories over all code points.
  int count = 0;
  for (char32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    const bool expected = is_separator(category(cp)) || (cp >= 9 && cp <= 13) || cp == 0x85;
    ASSERT_EQ(is_white_space(cp), expected) << std::hex << cp;
    count += expected;
  }
  EXPECT_EQ(count, 25);
  EXPECT_FALSE(is_white_space(0x1C));    // Python's str.isspace() says yes; \s does not
  EXPECT_FALSE(is_white_space(0x200B));  // zero width space is Cf
}

TEST(Utf8, CharClassAgreesWithCategories) {
  for (char32_t cp = 0; cp < 0x32000; ++cp) {
    const Category c = category(cp);
    const CharClass expected = is_white_space(cp) ? CharClass::kSpace
                               : is_letter(c)     ? CharClass::kLetter
                               : is_number(c)     ? CharClass::kNumber
                                                  : CharClass::kOther;
    ASSERT_EQ(char_class(cp), expected) << std::hex << cp;
    ASSERT_EQ(is_letter(cp), is_letter(c));
    ASSERT_EQ(is_number(cp), is_number(c));
  }
  EXPECT_EQ(category(U'A'), Category::kLu);
  EXPECT_EQ(category(0x0661), Category::kNd);  // ARABIC-INDIC DIGIT ONE
  EXPECT_EQ(category(0x2167), Category::kNl);  // ROMAN NUMERAL EIGHT
  EXPECT_EQ(category(0x0301), Category::kMn);
  EXPECT_EQ(category(0x1F916), Category::kSo);
  EXPECT_EQ(category(0x110000), Category::kCn);
  EXPECT_TRUE(is_other(category(0xE000)));  // private use
  EXPECT_TRUE(is_punctuation(category(U'!')));
  EXPECT_TRUE(is_mark(category(0x0308)));
}

TEST(Utf8, Normalize) {
  EXPECT_EQ(normalize("caf\xc3\xa9", NormalForm::kNFD), "cafe\xcc\x81");
  EXPECT_EQ(normalize("cafe\xcc\x81", NormalForm::kNFC), "caf\xc3\xa9");
  EXPECT_EQ(normalize("\xef\xac\x81", NormalForm::kNFKC), "fi");  // U+FB01 ligature
  EXPECT_EQ(normalize("\xef\xac\x81", NormalForm::kNFC), "\xef\xac\x81");
  EXPECT_EQ(normalize("\xe2\x84\xab", NormalForm::kNFKD), "A\xcc\x8a");  // ANGSTROM SIGN
  EXPECT_EQ(normalize("a\xff", NormalForm::kNFC), "a\xEF\xBF\xBD");
  EXPECT_EQ(normalize(std::string("a\0b", 3), NormalForm::kNFD), std::string("a\0b", 3));
}

}  // namespace
}  // namespace anvil::io::utf8
