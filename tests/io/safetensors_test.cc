// safetensors: a round trip keeps names, dtypes, shapes, values and metadata; the header follows
// the format byte for byte (length prefix, 8-byte padding, data_offsets); a truncated file,
// a header past the end or a bad dtype is refused naming the file. CRC-32C known answers.
#include "io/safetensors.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "io/crc32c.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using testing::read_file;
using testing::ScratchDir;
using testing::write_file;

TEST(Crc32cTest, KnownAnswers) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // Running checksum over pieces equals the one-shot value (exercises the 8-byte loop too).
  const std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  const uint32_t whole = crc32c(text.data(), text.size());
  EXPECT_EQ(crc32c_extend(crc32c(text.data(), 13), text.data() + 13, text.size() - 13), whole);
  EXPECT_EQ(crc32c("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 32),
            0x8A9136AAu);
}

TEST(SafetensorsTest, RoundTripAndLayout) {
  ScratchDir dir;
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  const std::vector<uint16_t> b = {engine::f32_to_bf16(1.0f), engine::f32_to_bf16(-3.0f)};
  const std::string path = dir.file("x.safetensors");
  auto written = write_safetensors(
      path, {{"w", StDType::kF32, {2, 3}, a.data()}, {"b", StDType::kBF16, {2}, b.data()}},
      {{"format", "pt"}});
  ASSERT_TRUE(written.ok()) << written.status();
  const std::string bytes = read_file(path);
  EXPECT_EQ(written->bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(written->crc32c, crc32c(bytes.data(), bytes.size()));
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + len + 6 * 4 + 2 * 2);
  EXPECT_NE(bytes.find("\"data_offsets\":[0,24]"), std::string::npos);
  EXPECT_NE(bytes.find("\"data_offsets\":[24,28]"), std::string::npos);

  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors().at("w").shape, (std::vector<int64_t>{2, 3}));
  auto w = f->read_f32("w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, a);
  auto bf = f->read_f32("b");
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ(*bf, (std::vector<float>{1.0f, -3.0f}));
  EXPECT_EQ(f->read_f32("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, RefusesBrokenFiles) {
  ScratchDir dir;
  const std::vector<float> a(16, 1.0f);
  const std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"w", StDType::kF32, {16}, a.data()}}, {}).ok());
  const std::string good = read_file(path);

  write_file(path, good.substr(0, good.size() - 4));  // truncated data
  auto t = SafetensorsFile::open(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos) << t.status();

  std::string big = good;
  big[5] = 1;  // header length far past the end
  write_file(path, big);
  EXPECT_EQ(SafetensorsFile::open(path).status().code(), absl::StatusCode::kDataLoss);

  std::string dtype = good;
  dtype.replace(dtype.find("F32"), 3, "Q32");
  write_file(path, dtype);
  auto d = SafetensorsFile::open(path);
  EXPECT_NE(d.status().message().find("unsupported dtype Q32"), std::string::npos) << d.status();

  write_file(path, "abc");
  EXPECT_EQ(SafetensorsFile::open(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SafetensorsFile::open(dir.file("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

// A header whose element count wraps around int64 (4611686018427387952 * 4 * 4 bytes = 768 mod
// 2^64) must not pass for a 768-byte tensor.
TEST(SafetensorsTest, RefusesAShapeWhoseSizeOverflows) {
  ScratchDir dir;
  const std::string path = dir.file("wrap.safetensors");
  std::string header =
      R"({"w":{"dtype":"F32","shape":[4611686018427387952,4],"data_offsets":[0,768]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(path, file + header + std::string(768, '\0'));
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << f.status();
  EXPECT_NE(f.status().message().find("tensor \"w\": shape [4611686018427387952,4] has more than"),
            std::string::npos)
      << f.status();

  const float x = 0.0f;
  auto w = write_safetensors(dir.file("out.safetensors"),
                             {{"big", StDType::kF32, {int64_t{1} << 62, 4}, &x}}, {});
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("\"big\""), std::string::npos) << w.status();
}

}  // namespace
}  // namespace anvil::io
