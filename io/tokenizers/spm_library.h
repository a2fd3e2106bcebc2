// A thin, std-only wrapper of the sentencepiece library's SentencePieceProcessor (Debian's
// libsentencepiece). It exists because sentencepiece_processor.h defines `absl::string_view` as
// std::string_view, which clashes with Debian's Abseil (built with its own absl::string_view):
// the library header is included by spm_library.cc alone, and this header includes no Abseil.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace anvil::io::spm {

class Processor {
 public:
  Processor();
  ~Processor();
  Processor(const Processor&) = delete;
  Processor& operator=(const Processor&) = delete;

  // Loads a .model file. Returns "" on success, else the library's message.
  std::string load(const std::string& path);

  // Thread-safe (the library's Encode/Decode are const). Return "" or the library's message.
  // `text` must be well-formed UTF-8.
  std::string encode(std::string_view text, std::vector<int>* ids) const;
  std::string decode(const std::vector<int>& ids, std::string* text) const;

  int piece_size() const;
  // -1 when the model disables the token.
  int pad_id() const;
  int eos_id() const;
  int unk_id() const;
  int bos_id() const;
  // The piece of `id` (0 <= id < piece_size()).
  std::string id_to_piece(int id) const;
  // The id of `piece`, or unk_id() when absent (the library's convention).
  int piece_to_id(std::string_view piece) const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> impl_;
};

}  // namespace anvil::io::spm
