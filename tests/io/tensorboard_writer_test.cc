// io/tensorboard_writer: the event file is read back by a minimal TFRecord reader written here
// (its own bitwise CRC-32C and mask, both checksums of every record checked), the records are
// decoded with the generated protobuf parser, and the first records are also compared byte by
// byte with protobuf wire encodings written out by hand from TensorBoard's field numbers
// (Event: wall_time 1 double, step 2 varint, file_version 3, summary 5; Summary: value 1;
// Value: tag 1, simple_value 2 float), so a wrong field number in the .proto fails too.
#include "io/tensorboard_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/tensorboard_event.pb.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

namespace tb = anvil::io::tensorboard;
using testing::ScratchDir;

// CRC-32C bit by bit (reflected polynomial 0x82F63B78), independent of io/crc32c's tables.
uint32_t crc32c_bitwise(const std::string& s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t masked(const std::string& s) {
  const uint32_t c = crc32c_bitwise(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

uint64_t get_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  }
  return v;
}

// The payloads of every record of `path`; a failed length or checksum check fails the test.
std::vector<std::string> read_records(const std::string& path) {
  const std::string f = testing::read_file(path);
  std::vector<std::string> out;
  size_t at = 0;
  while (at < f.size()) {
    if (f.size() - at < 12) {
      ADD_FAILURE() << "truncated record header at byte " << at;
      break;
    }
    const uint64_t len = get_le(f, at, 8);
    EXPECT_EQ(get_le(f, at + 8, 4), masked(f.substr(at, 8))) << "length CRC at byte " << at;
    if (f.size() - at - 12 < len + 4) {
      ADD_FAILURE() << "truncated record data at byte " << at;
      break;
    }
    std::string data = f.substr(at + 12, len);
    EXPECT_EQ(get_le(f, at + 12 + len, 4), masked(data)) << "data CRC at byte " << at;
    out.push_back(std::move(data));
    at += 12 + len + 4;
  }
  return out;
}

tb::Event parse(const std::string& data) {
  tb::Event e;
  EXPECT_TRUE(e.ParseFromString(data));
  return e;
}

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// Protobuf wire pieces: a tag byte (field << 3 | wire type) and little-endian fixed values.
std::string fixed64(double v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);  // x86-64 and aarch64: little-endian, as the wire format
  return s;
}
std::string fixed32(float v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}
std::string length_delimited(int field, const std::string& body) {
  EXPECT_LT(body.size(), 128u);  // one-byte length varints only
  return std::string(1, static_cast<char>(field << 3 | 2)) +
         std::string(1, static_cast<char>(body.size())) + body;
}

TEST(TensorBoardWriter, FileNameAndVersionRecord) {
  ScratchDir dir;
  const int64_t before = static_cast<int64_t>(std::time(nullptr));
  const double t0 = now();
  auto w = TensorBoardWriter::open(dir.path() + "/run/a");  // parents are created
  ASSERT_TRUE(w.ok()) << w.status();
  const double t1 = now();
  const int64_t after = static_cast<int64_t>(std::time(nullptr));
  const std::string name = std::filesystem::path((*w)->path()).filename().string();
  EXPECT_EQ(std::filesystem::path((*w)->path()).parent_path().string(), dir.path() + "/run/a");
  // events.out.tfevents.<unix time>.<hostname>
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(name.substr(0, prefix.size()), prefix) << name;
  const size_t dot = name.find('.', prefix.size());
  ASSERT_NE(dot, std::string::npos) << name;
  const int64_t t = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  EXPECT_GE(t, before);
  EXPECT_LE(t, after);
  EXPECT_EQ(name.substr(dot + 1), host());

  // The version record is on disk before any flush.
  const std::vector<std::string> recs = read_records((*w)->path());
  ASSERT_EQ(recs.size(), 1u);
  const tb::Event e = parse(recs[0]);
  EXPECT_EQ(e.what_case(), tb::Event::kFileVersion);
  EXPECT_EQ(e.file_version(), "brain.Event:2");
  EXPECT_EQ(e.step(), 0);
  EXPECT_GE(e.wall_time(), t0);
  EXPECT_LE(e.wall_time(), t1);
  // wall_time (field 1, fixed64) then file_version (field 3, length-delimited).
  EXPECT_EQ(recs[0], "\x09" + fixed64(e.wall_time()) + length_delimited(3, "brain.Event:2"));
}

TEST(TensorBoardWriter, ScalarsRoundTripAfterFlush) {
  ScratchDir dir;
  auto w = TensorBoardWriter::open(dir.path());
  ASSERT_TRUE(w.ok()) << w.status();
  struct Point {
    std::string tag;
    double value;
    int64_t step;
  };
  const std::vector<Point> points = {
      {"lm-loss-training/lm loss", 10.8249, 1},
      {"lm-loss-training/lm loss vs samples", 10.8249, 4096},
      {"learning-rate/learning-rate", 3e-4, 100},
      {"memory/mem-allocated-bytes", 123456789.0, 1LL << 40},  // a step past 32 bits
      {"grad-norm/grad-norm", std::nan(""), 7},
      {"", -0.5, 0},
  };
  const double t0 = now();
  for (const Point& p : points) (*w)->add_scalar(p.tag, p.value, p.step);
  // Buffered: nothing but the version record on disk yet.
  EXPECT_EQ(read_records((*w)->path()).size(), 1u);
  ASSERT_TRUE((*w)->flush().ok());
  const double t1 = now();
  const std::vector<std::string> recs = read_records((*w)->path());
  ASSERT_EQ(recs.size(), points.size() + 1);
  for (size_t i = 0; i < points.size(); ++i) {
    SCOPED_TRACE(points[i].tag);
    const tb::Event e = parse(recs[i + 1]);
    ASSERT_EQ(e.what_case(), tb::Event::kSummary);
    EXPECT_EQ(e.step(), points[i].step);
    EXPECT_GE(e.wall_time(), t0);
    EXPECT_LE(e.wall_time(), t1);
    ASSERT_EQ(e.summary().value_size(), 1);
    const tb::Summary::Value& v = e.summary().value(0);
    EXPECT_EQ(v.tag(), points[i].tag);
    ASSERT_EQ(v.value_case(), tb::Summary::Value::kSimpleValue);
    const float want = static_cast<float>(points[i].value);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(v.simple_value()));
    } else {
      EXPECT_EQ(v.simple_value(), want);
    }
  }
  // Record 1 by hand: wall_time (1), step (2, varint 1), summary (5) { value (1) { tag (1),
  // simple_value (2, fixed32) } }.
  const tb::Event e1 = parse(recs[1]);
  const std::string value =
      length_delimited(1, points[0].tag) + "\x15" + fixed32(static_cast<float>(points[0].value));
  EXPECT_EQ(recs[1], "\x09" + fixed64(e1.wall_time()) + "\x10\x01" +
                         length_delimited(5, length_delimited(1, value)));

  // A second flush adds only what was added since.
  (*w)->add_scalar("x", 2.0, 9);
  ASSERT_TRUE((*w)->flush().ok());
  ASSERT_TRUE((*w)->flush().ok());
  const std::vector<std::string> more = read_records((*w)->path());
  ASSERT_EQ(more.size(), points.size() + 2);
  EXPECT_EQ(parse(more.back()).summary().value(0).tag(), "x");
}

TEST(TensorBoardWriter, DestructorFlushes) {
  ScratchDir dir;
  std::string path;
  {
    auto w = TensorBoardWriter::open(dir.path());
    ASSERT_TRUE(w.ok()) << w.status();
    path = (*w)->path();
    (*w)->add_scalar("a", 1.5, 3);
  }
  const std::vector<std::string> recs = read_records(path);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(parse(recs[1]).summary().value(0).simple_value(), 1.5f);
}

TEST(TensorBoardWriter, SecondWriterGetsItsOwnFile) {
  ScratchDir dir;
  auto a = TensorBoardWriter::open(dir.path());
  auto b = TensorBoardWriter::open(dir.path());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
  (*a)->add_scalar("a", 1.0, 1);
  (*b)->add_scalar("b", 2.0, 1);
  ASSERT_TRUE((*a)->flush().ok());
  ASSERT_TRUE((*b)->flush().ok());
  EXPECT_EQ(parse(read_records((*a)->path())[1]).summary().value(0).tag(), "a");
  EXPECT_EQ(parse(read_records((*b)->path())[1]).summary().value(0).tag(), "b");
}

TEST(TensorBoardWriter, UnusableDirectoryIsAnErrorNamingIt) {
  ScratchDir dir;
  const std::string file = dir.file("plain_file");
  testing::write_file(file, "x");
  for (const std::string& bad : {file, file + "/sub"}) {
    auto w = TensorBoardWriter::open(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_NE(std::string(w.status().message()).find(bad), std::string::npos) << w.status();
  }
  EXPECT_FALSE(TensorBoardWriter::open("").ok());
  if (::geteuid() != 0) {  // root writes anywhere
    const std::string ro = dir.file("read_only");
    ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
    auto w = TensorBoardWriter::open(ro);
    ASSERT_FALSE(w.ok());
    EXPECT_NE(std::string(w.status().message()).find(ro), std::string::npos) << w.status();
  }
}

}  // namespace
}  // namespace anvil::io
