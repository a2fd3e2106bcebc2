// Durable sequential writes, directory fsync and atomic small-file replacement (POSIX).
#include "io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/crc32c.h"

namespace anvil::io {
namespace {

absl::Status errno_error(const std::string& what, const std::string& path) {
  return absl::DataLossError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<DurableWriter> DurableWriter::create(const std::string& path) {
  DurableWriter w;
  w.path_ = path;
  w.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0) return errno_error("cannot create", path);
  return w;
}

DurableWriter::DurableWriter(DurableWriter&& o) noexcept { *this = std::move(o); }

DurableWriter& DurableWriter::operator=(DurableWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    bytes_ = o.bytes_;
    crc_ = o.crc_;
  }
  return *this;
}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status DurableWriter::append(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  crc_ = crc32c_extend(crc_, p, n);
  bytes_ += static_cast<int64_t>(n);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno_error("write failed", path_);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status DurableWriter::finish() {
  if (::fsync(fd_) != 0) return errno_error("fsync failed", path_);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return errno_error("close failed", path_);
  return absl::OkStatus();
}

absl::Status fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("cannot open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return errno_error("fsync of the directory failed", dir);
  return absl::OkStatus();
}

absl::Status write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  ANVIL_ASSIGN_OR_RETURN(DurableWriter w, DurableWriter::create(tmp));
  ANVIL_RETURN_IF_ERROR(w.append(text.data(), text.size()));
  ANVIL_RETURN_IF_ERROR(w.finish());
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return errno_error("rename failed", tmp);
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return fsync_dir(parent.empty() ? std::string(".") : parent.string());
}

absl::StatusOr<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return absl::DataLossError(absl::StrCat(path, ": cannot open"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ss.str();
}

}  // namespace anvil::io
