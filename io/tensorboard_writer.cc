// TensorBoard event files (io/tensorboard_writer.h): TFRecord framing with masked CRC-32C over
// serialized tensorboard Event messages.
#include "io/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "io/crc32c.h"
#include "io/file_checks.h"
#include "io/tensorboard_event.pb.h"

namespace anvil::io {
namespace {

namespace tb = anvil::io::tensorboard;

// TFRecord's checksum: rotated so that a CRC over bytes holding CRCs stays well distributed.
uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t crc = crc32c(data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

void put_le(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::open(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("TensorBoard directory: empty path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("TensorBoard directory ", dir, ": cannot create it: ", ec.message()));
  }
  // TensorFlow's name; O_EXCL keeps an existing file (another run's) intact.
  const std::string base = absl::StrCat(dir, "/events.out.tfevents.",
                                        static_cast<int64_t>(std::time(nullptr)), ".", hostname());
  std::unique_ptr<TensorBoardWriter> w(new TensorBoardWriter());
  for (int n = 0; w->fd_ < 0; ++n) {
    w->path_ = n == 0 ? base : absl::StrCat(base, ".", n);
    w->fd_ = ::open(w->path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (w->fd_ < 0 && (errno != EEXIST || n >= 1000)) {
      return absl::PermissionDeniedError(
          absl::StrCat("TensorBoard event file ", errno_message(w->path_, "create it", errno)));
    }
  }
  tb::Event e;
  e.set_wall_time(wall_time_now());
  e.set_file_version("brain.Event:2");
  w->append_record(e.SerializeAsString());
  if (absl::Status s = w->flush(); !s.ok()) return s;
  return w;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ < 0) return;
  (void)flush();
  ::close(fd_);
}

void TensorBoardWriter::append_record(const std::string& data) {
  std::string length;
  put_le(&length, data.size(), 8);
  buffer_ += length;
  put_le(&buffer_, masked_crc32c(length.data(), length.size()), 4);
  buffer_ += data;
  put_le(&buffer_, masked_crc32c(data.data(), data.size()), 4);
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, int64_t step) {
  tb::Event e;
  e.set_wall_time(wall_time_now());
  e.set_step(step);
  tb::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  append_record(e.SerializeAsString());
}

absl::Status TensorBoardWriter::flush() {
  const std::string data = std::exchange(buffer_, std::string());
  const char* p = data.data();
  size_t n = data.size();
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(
          absl::StrCat("TensorBoard event file ", errno_message(path_, "write", errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace anvil::io
