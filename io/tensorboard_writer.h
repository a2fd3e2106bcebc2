// TensorBoard event files for scalar metrics, the files tf.summary and torch's SummaryWriter
// write: DIR/events.out.tfevents.<unix time>.<hostname>, a sequence of TFRecord records
//   u64 length | u32 masked_crc(length's 8 bytes) | data[length] | u32 masked_crc(data)
// (little-endian; masked_crc(x) = rotr(crc32c(x), 15) + 0xa282ead8), each record one serialized
// Event of io/tensorboard_event.proto: the first {wall_time, file_version "brain.Event:2"},
// then one {wall_time, step, summary {value {tag, simple_value}}} per scalar.
// add_scalar() only appends to a buffer in memory; flush() writes the buffer to the file in one
// write, so a crashed process loses at most what was added since the last flush (no fsync: a
// crashed machine may lose more).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::io {

class TensorBoardWriter {
 public:
  // Creates `dir` (with its parents) when missing and a new event file in it; the file_version
  // record is written at once. When the name is taken (a second writer in the same second on
  // the same host) ".1", ".2", ... is appended (TensorBoard reads every file whose name holds
  // "tfevents"). Errors name the directory or the file and the reason.
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> open(const std::string& dir);
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
  ~TensorBoardWriter();  // flushes what is buffered (call flush() first to see an error)

  // Appends the record of scalar `tag` = `value` at x-axis `step` (stored as a float, as
  // TensorBoard's simple_value) to the buffer, with the current wall time.
  void add_scalar(std::string_view tag, double value, int64_t step);
  // Writes the buffered records to the file. DataLoss naming the file when the write fails
  // (the buffer is dropped: the file may then end in a partial record, which readers skip).
  absl::Status flush();

  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter() = default;
  void append_record(const std::string& data);

  std::string path_;
  int fd_ = -1;
  std::string buffer_;  // framed records not yet written
};

}  // namespace anvil::io
