// Files that survive a crash once written: every write is checked, the file is fsynced before
// it is closed, and directories are fsynced after entries are added or renamed, so a checkpoint
// that is visible under its final name is complete on disk (POSIX: rename is atomic; the
// fsyncs order the data before the name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace anvil::io {

// Writes a new file sequentially and keeps the running CRC-32C of what was written.
class DurableWriter {
 public:
  // Creates or truncates `path`. Errors name the path.
  static absl::StatusOr<DurableWriter> create(const std::string& path);
  DurableWriter(DurableWriter&& o) noexcept;
  DurableWriter& operator=(DurableWriter&& o) noexcept;
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;
  ~DurableWriter();  // closes without fsync when finish() was not called (an error path)

  absl::Status append(const void* data, size_t n);
  // fsync + close.
  absl::Status finish();
  int64_t bytes() const { return bytes_; }
  uint32_t crc32c() const { return crc_; }

 private:
  DurableWriter() = default;
  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

// fsync of a directory (after creating, removing or renaming entries in it).
absl::Status fsync_dir(const std::string& dir);

// Writes `text` to path.tmp-<pid>, fsyncs it, renames it to `path` and fsyncs the directory: a
// reader sees the old or the new content, never a mix.
absl::Status write_file_atomic(const std::string& path, const std::string& text);

// The whole file as a string; NotFound / DataLoss naming the path.
absl::StatusOr<std::string> read_file(const std::string& path);

}  // namespace anvil::io
