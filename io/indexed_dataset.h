// Megatron MMapIndexedDataset (.bin/.idx), byte-compatible both ways (DESIGN.md §6):
//   .bin: token arrays concatenated, no header, little-endian.
//   .idx: "MMIDIDX\0\0" | u64 version=1 | u8 dtype code | u64 N sequences | u64 D doc_idx count
//         | i32 sizes[N] | i64 pointers[N] (byte offsets into .bin) | i64 doc_idx[D]
//   doc_idx[0] = 0, doc_idx[D-1] = N; document d = sequences [doc_idx[d], doc_idx[d+1]).
// The reader memory-maps both files and validates the index against the .bin size, so a
// truncated or corrupt file is an error naming the file and the field, never garbage. A .bin
// truncated later, while it is read, is a DataLoss error naming the file from read() (a size
// check per read, and io/sigbus_guard.h for what slips between the check and the access); the
// binaries stop on it with status 1 (bin/data_streams.h).
// Token ids are checked against a vocabulary by check_token_ids (one pass over the .bin, whose
// result can be cached).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace anvil::io {

// Megatron's dtype codes. The float ones (6, 7) are neither read nor written: token ids are
// integers (and 7's meaning differs across versions).
enum class TokenDType : uint8_t {
  kU8 = 1,
  kI8 = 2,
  kI16 = 3,
  kI32 = 4,
  kI64 = 5,
  kF64 = 6,
  kF32 = 7,
  kU16 = 8
};

// Megatron's choice: u16 when the vocabulary fits (vocab < 65500), else i32.
TokenDType token_dtype_for_vocab(int64_t vocab_size);
size_t token_dtype_size(TokenDType t);

// Smallest and largest token id of a dataset; {0, -1} when it has no tokens.
struct TokenIdRange {
  int64_t min = 0;
  int64_t max = -1;
};

class IndexedDataset {
 public:
  // Opens prefix.idx and prefix.bin. NotFound / DataLoss / InvalidArgument name the file and
  // what was wrong (bad magic, unknown version/dtype, index size mismatch, pointer past .bin).
  // Float dtype codes (6: float64; 7: float64 in BigScience, float32 in NVIDIA) are refused:
  // token ids are integers.
  static absl::StatusOr<std::unique_ptr<IndexedDataset>> open(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  TokenDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(doc_idx_.size()) - 1; }
  const std::vector<int32_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& pointers() const { return pointers_; }
  const std::vector<int64_t>& doc_idx() const { return doc_idx_; }
  int64_t total_tokens() const;

  // Tokens [offset, offset + count) of sequence `seq`, widened to i32 (CHECKs bounds). A .bin
  // that no longer holds them (one fstat) is a DataLoss error naming the file.
  absl::Status read(int64_t seq, int64_t offset, int64_t count, int32_t* out) const;

  // The smallest and largest token id: one pass over the .bin. With a cache_path, the result
  // is kept in that small text file (best effort) and read back while the .bin and .idx keep
  // their sizes and modification times.
  TokenIdRange token_id_range(const std::string& cache_path = "") const;

  // InvalidArgument naming the .bin, the document, sequence and position of the first token id
  // outside [0, vocab_size) (negative ids, and int64 ids that do not fit int32, included), from
  // token_id_range(cache_path) (a second pass only to locate a bad id); nothing is read when
  // the dtype cannot hold such an id (uint16 with vocab_size >= 65536).
  absl::Status check_token_ids(int64_t vocab_size, const std::string& cache_path = "") const;

 private:
  IndexedDataset() = default;
  std::string bin_path_;
  int bin_fd_ = -1;  // kept open for the size check in read()
  TokenDType dtype_ = TokenDType::kU16;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> doc_idx_;
  int64_t total_tokens_ = 0;
  const uint8_t* bin_ = nullptr;  // mmapped .bin (nullptr when the .bin is empty)
  size_t bin_bytes_ = 0;
};

// Streams sequences to prefix.bin and writes prefix.idx at finish(). Both files are written
// under temporary names and renamed when complete, so a crash never leaves a half index.
class IndexedDatasetWriter {
 public:
  static absl::StatusOr<std::unique_ptr<IndexedDatasetWriter>> create(const std::string& prefix,
                                                                      TokenDType dtype);
  ~IndexedDatasetWriter();
  // Appends one sequence (a sentence, or a whole document). Tokens out of the dtype's range are
  // InvalidArgument. Empty sequences are skipped (as Megatron does).
  absl::Status add_sequence(absl::Span<const int32_t> tokens);
  // Closes the current document; a document without sequences is skipped.
  absl::Status end_document();
  // Writes the index and renames both files into place. Sequences added since the last
  // end_document() form a final document.
  absl::Status finish();

 private:
  IndexedDatasetWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil::io
