// make_tokenizer: picks the implementation by type name (Megatron's names accepted as aliases)
// and forwards to its factory (io/tokenizers/factories.h).
#include "io/tokenizer.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "io/tokenizers/factories.h"

namespace anvil::io {

absl::StatusOr<std::unique_ptr<Tokenizer>> make_tokenizer(const TokenizerOptions& options) {
  const std::string& t = options.type;
  auto is = [&t](const char* name) { return absl::EqualsIgnoreCase(t, name); };
  if (is("GPT2BPE") || is("GPT2BPETokenizer")) return make_gpt2_tokenizer(options);
  if (is("BertWordPieceLowerCase")) return make_wordpiece_tokenizer(options, true);
  if (is("BertWordPieceCase")) return make_wordpiece_tokenizer(options, false);
  if (is("SentencePiece") || is("SentencePieceTokenizer")) {
    return make_sentencepiece_tokenizer(options);
  }
  if (is("HF") || is("HuggingFaceTokenizer")) return make_hf_tokenizer(options);
  if (is("Byte")) return make_byte_tokenizer(options);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tokenizer type '", t,
      "'; expected GPT2BPE, BertWordPieceLowerCase, BertWordPieceCase, SentencePiece, HF or "
      "Byte"));
}

}  // namespace anvil::io
