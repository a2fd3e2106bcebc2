// IndexedDataset / IndexedDatasetWriter: round trips for every integer dtype, byte identity with
// files written by Megatron's numpy code (tests/io/fixtures, scripts/make_idx_fixture.py), one
// error naming the file and the problem for each kind of corrupt or missing input, token ids
// checked against a vocabulary, and a .bin truncated while in use (io/sigbus_guard.h).
#include "io/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/sigbus_guard.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using testing::Docs;
using ::testing::HasSubstr;
using testing::ScratchDir;

// Writes `docs` (each a list of sequences) with anvil's writer.
void write_docs(const std::string& prefix, TokenDType dtype, const Docs& docs) {
  auto w = IndexedDatasetWriter::create(prefix, dtype);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const auto& doc : docs) {
    for (const auto& seq : doc) ASSERT_TRUE((*w)->add_sequence(seq).ok());
    ASSERT_TRUE((*w)->end_document().ok());
  }
  ASSERT_TRUE((*w)->finish().ok());
}

std::vector<int32_t> read_seq(const IndexedDataset& ds, int64_t i) {
  std::vector<int32_t> out(ds.sizes()[i]);
  EXPECT_TRUE(ds.read(i, 0, ds.sizes()[i], out.data()).ok());
  return out;
}

// Every sequence and document boundary of `ds` equals `docs` (empty ones dropped).
void expect_contents(const IndexedDataset& ds, const Docs& docs) {
  std::vector<std::vector<int32_t>> seqs;
  std::vector<int64_t> doc_idx = {0};
  for (const auto& doc : docs) {
    for (const auto& s : doc) {
      if (!s.empty()) seqs.push_back(s);
    }
    if (static_cast<int64_t>(seqs.size()) > doc_idx.back()) doc_idx.push_back(seqs.size());
  }
  ASSERT_EQ(ds.num_sequences(), static_cast<int64_t>(seqs.size()));
  EXPECT_EQ(ds.doc_idx(), doc_idx);
  EXPECT_EQ(ds.num_documents(), static_cast<int64_t>(doc_idx.size()) - 1);
  int64_t total = 0, pointer = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(ds.sizes()[i], static_cast<int32_t>(seqs[i].size()));
    EXPECT_EQ(ds.pointers()[i], pointer);
    pointer += seqs[i].size() * token_dtype_size(ds.dtype());
    EXPECT_EQ(read_seq(ds, i), seqs[i]) << "sequence " << i;
    total += seqs[i].size();
  }
  EXPECT_EQ(ds.total_tokens(), total);
}

TEST(TokenDType, MegatronChoiceAndSizes) {
  EXPECT_EQ(token_dtype_for_vocab(257), TokenDType::kU16);
  EXPECT_EQ(token_dtype_for_vocab(50257), TokenDType::kU16);
  EXPECT_EQ(token_dtype_for_vocab(65499), TokenDType::kU16);
  EXPECT_EQ(token_dtype_for_vocab(65500), TokenDType::kI32);
  EXPECT_EQ(token_dtype_for_vocab(250880), TokenDType::kI32);
  EXPECT_EQ(token_dtype_size(TokenDType::kU8), 1u);
  EXPECT_EQ(token_dtype_size(TokenDType::kI16), 2u);
  EXPECT_EQ(token_dtype_size(TokenDType::kU16), 2u);
  EXPECT_EQ(token_dtype_size(TokenDType::kI32), 4u);
  EXPECT_EQ(token_dtype_size(TokenDType::kI64), 8u);
}

TEST(IndexedDataset, RoundTripEveryIntegerDType) {
  struct Case {
    TokenDType dtype;
    int32_t lo, hi;
  };
  const Case cases[] = {
      {TokenDType::kU8, 0, 255},
      {TokenDType::kI8, -128, 127},
      {TokenDType::kI16, -32768, 32767},
      {TokenDType::kU16, 0, 65535},
      {TokenDType::kI32, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()},
      {TokenDType::kI64, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.dtype));
    ScratchDir dir;
    const std::string prefix = dir.file("rt");
    const Docs docs = {
        {{c.lo, c.hi, 1, 2, 3}},
        {{7}, {}, {8, 9}, {c.hi}},  // a sentence-split document with an empty sentence
        {},                         // an empty document: skipped
        {{}, {}},                   // only empty sentences: skipped
        {{100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110}},
    };
    write_docs(prefix, c.dtype, docs);
    auto ds = IndexedDataset::open(prefix);
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->dtype(), c.dtype);
    expect_contents(**ds, docs);
    EXPECT_EQ((*ds)->num_documents(), 3);
    // A partial read from the middle of a sequence.
    int32_t part[3];
    EXPECT_TRUE((*ds)->read(4, 4, 3, part).ok());
    EXPECT_EQ(part[0], 104);
    EXPECT_EQ(part[2], 106);
  }
}

TEST(IndexedDataset, EmptyDatasetRoundTrips) {
  ScratchDir dir;
  write_docs(dir.file("empty"), TokenDType::kU16, {});
  EXPECT_EQ(testing::read_file(dir.file("empty.idx")).size(), 34u + 8u);
  EXPECT_EQ(testing::read_file(dir.file("empty.bin")).size(), 0u);
  auto ds = IndexedDataset::open(dir.file("empty"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_sequences(), 0);
  EXPECT_EQ((*ds)->num_documents(), 0);
  EXPECT_EQ((*ds)->total_tokens(), 0);
}

TEST(IndexedDatasetWriter, FinishClosesAnOpenDocument) {
  ScratchDir dir;
  auto w = IndexedDatasetWriter::create(dir.file("open"), TokenDType::kU16);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->add_sequence(std::vector<int32_t>{1, 2}).ok());
  ASSERT_TRUE((*w)->end_document().ok());
  ASSERT_TRUE((*w)->end_document().ok());  // nothing since the last one: no empty document
  ASSERT_TRUE((*w)->add_sequence(std::vector<int32_t>{3}).ok());
  ASSERT_TRUE((*w)->finish().ok());
  auto ds = IndexedDataset::open(dir.file("open"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->doc_idx(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ((*w)->finish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*w)->add_sequence(std::vector<int32_t>{1}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(IndexedDatasetWriter, RejectsTokensOutsideTheDType) {
  ScratchDir dir;
  auto w = IndexedDatasetWriter::create(dir.file("range"), TokenDType::kU16);
  ASSERT_TRUE(w.ok());
  absl::Status s = (*w)->add_sequence(std::vector<int32_t>{1, 65536});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("65536"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("uint16"));
  EXPECT_EQ((*w)->add_sequence(std::vector<int32_t>{-1}).code(),
            absl::StatusCode::kInvalidArgument);
  // A rejected sequence writes nothing: the dataset stays consistent.
  ASSERT_TRUE((*w)->add_sequence(std::vector<int32_t>{5}).ok());
  ASSERT_TRUE((*w)->finish().ok());
  auto ds = IndexedDataset::open(dir.file("range"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  expect_contents(**ds, {{{5}}});

  auto u8 = IndexedDatasetWriter::create(dir.file("u8"), TokenDType::kU8);
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ((*u8)->add_sequence(std::vector<int32_t>{256}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IndexedDatasetWriter::create(dir.file("f"), TokenDType::kF32).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IndexedDatasetWriter::create(dir.file("f"), TokenDType::kF64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IndexedDatasetWriter, WritesAtomically) {
  ScratchDir dir;
  const std::string prefix = dir.file("atomic");
  {
    auto w = IndexedDatasetWriter::create(prefix, TokenDType::kU16);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->add_sequence(std::vector<int32_t>{1, 2, 3}).ok());
    // Nothing under the final names until finish().
    EXPECT_FALSE(testing::file_exists(prefix + ".bin"));
    EXPECT_FALSE(testing::file_exists(prefix + ".idx"));
  }  // abandoned without finish(): the temporaries are removed
  EXPECT_FALSE(testing::file_exists(prefix + ".bin"));
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + dir.path() + "')\"").c_str()), 0)
      << "temporary files left behind";
  EXPECT_EQ(
      IndexedDatasetWriter::create(dir.file("no/such/dir/x"), TokenDType::kU16).status().code(),
      absl::StatusCode::kNotFound);
}

// ---- Token ids against the vocabulary ------------------------------------------------------

TEST(IndexedDataset, CheckTokenIdsNamesFileDocumentAndPosition) {
  ScratchDir dir;
  const std::string u16 = dir.file("u16");
  write_docs(u16, TokenDType::kU16, {{{1, 2}}, {{3}, {4, 300}}});
  auto ds = IndexedDataset::open(u16);
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE((*ds)->check_token_ids(301).ok());
  const absl::Status bad = (*ds)->check_token_ids(300);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()),
              HasSubstr(u16 + ".bin: document 1 (sequence 2, token 1, byte 8) holds token id 300, "
                              "outside [0, 300)"));

  // Negative ids (int32 files) and int64 ids beyond int32.
  const std::string i32 = dir.file("i32");
  write_docs(i32, TokenDType::kI32, {{{5, -3}}});
  ds = IndexedDataset::open(i32);
  ASSERT_TRUE(ds.ok());
  EXPECT_THAT(std::string((*ds)->check_token_ids(10).message()),
              HasSubstr("document 0 (sequence 0, token 1, byte 4) holds token id -3"));
  const std::string i64 = dir.file("i64");
  write_docs(i64, TokenDType::kI64, {{{1}}, {{2, 3}}});
  std::string bin = testing::read_file(i64 + ".bin");
  const int64_t huge = int64_t{1} << 40;
  std::memcpy(&bin[16], &huge, 8);  // document 1 (sequence 1), token 1
  testing::write_file(i64 + ".bin", bin);
  ds = IndexedDataset::open(i64);
  ASSERT_TRUE(ds.ok());
  EXPECT_THAT(std::string((*ds)->check_token_ids(10).message()),
              HasSubstr("document 1 (sequence 1, token 1, byte 16) holds token id 1099511627776, "
                        "outside [0, 10) (the vocabulary size); it does not even fit int32"));
}

TEST(IndexedDataset, TokenIdRangeIsCachedWhileTheFilesAreUnchanged) {
  ScratchDir dir;
  const std::string prefix = dir.file("r"), cache = dir.file("r_token_ids.txt");
  write_docs(prefix, TokenDType::kI32, {{{5, -3}}, {{7}}});
  auto ds = IndexedDataset::open(prefix);
  ASSERT_TRUE(ds.ok());
  TokenIdRange r = (*ds)->token_id_range(cache);
  EXPECT_EQ(r.min, -3);
  EXPECT_EQ(r.max, 7);
  // Read back from the cache: a doctored range under the same file key is believed.
  const std::string text = testing::read_file(cache);
  testing::write_file(cache, "0 1" + text.substr(text.find(' ', text.find(' ') + 1)));
  EXPECT_EQ((*ds)->token_id_range(cache).max, 1);
  EXPECT_TRUE((*ds)->check_token_ids(2, cache).ok());
  EXPECT_EQ((*ds)->token_id_range().max, 7);  // no cache: scanned
  // Other files under the same names: scanned again.
  write_docs(prefix, TokenDType::kI32, {{{5, 9, 1}}});
  ds = IndexedDataset::open(prefix);
  ASSERT_TRUE(ds.ok());
  r = (*ds)->token_id_range(cache);
  EXPECT_EQ(r.min, 1);
  EXPECT_EQ(r.max, 9);
  EXPECT_THAT(std::string((*ds)->check_token_ids(9, cache).message()),
              HasSubstr("document 0 (sequence 0, token 1, byte 4) holds token id 9"));
}

// ---- A .bin truncated while it is read ------------------------------------------------------

TEST(IndexedDatasetTest, BinTruncatedWhileInUseNamesTheFile) {
  ScratchDir dir;
  const std::string prefix = dir.file("shrinks");
  const std::vector<int32_t> seq(8192, 7);  // 16 KiB per sequence: whole pages past the cut
  write_docs(prefix, TokenDType::kU16, {{seq}, {seq}});
  auto ds = IndexedDataset::open(prefix);
  ASSERT_TRUE(ds.ok());
  std::vector<int32_t> out(seq.size());
  ASSERT_EQ(::truncate((prefix + ".bin").c_str(), 4096), 0);
  EXPECT_TRUE((*ds)->read(0, 0, 2048, out.data()).ok());  // what is still there reads
  EXPECT_EQ(out[2047], 7);
  // A data error, not a bug: DataLoss naming the file (bin/ stops on it with status 1).
  const absl::Status st = (*ds)->read(1, 0, 8192, out.data());
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("shrinks.bin: the file shrank to 4096 bytes after it was opened"));
}

TEST(SigbusGuardDeathTest, NamesTheTruncatedFile) {
  ScratchDir dir;
  const std::string path = dir.file("mapped.bin");
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  testing::write_file(path, std::string(3 * page, 'x'));
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, 3 * page, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  const volatile char* p = static_cast<const char*>(map);
  register_mapping(map, 3 * page, path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  const std::string byte = std::to_string(2 * page + 5);
  EXPECT_DEATH((void)p[2 * page + 5], "anvil: SIGBUS reading .*mapped.bin at byte " + byte);
  unregister_mapping(map);
  ::munmap(map, 3 * page);
}

// ---- Megatron numpy fixture ---------------------------------------------------------------

class MegatronFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(MegatronFixture, WriterIsByteIdenticalToNumpy) {
  const std::string name = GetParam();
  const std::string fixture = testing::fixture_dir() + "/megatron_" + name;
  const Docs docs = testing::read_listing(fixture + ".txt");
  ASSERT_FALSE(docs.empty());
  const TokenDType dtype = name == "u16" ? TokenDType::kU16 : TokenDType::kI32;
  ScratchDir dir;
  write_docs(dir.file("anvil"), dtype, docs);
  const std::string want_idx = testing::read_file(fixture + ".idx");
  const std::string want_bin = testing::read_file(fixture + ".bin");
  ASSERT_FALSE(want_idx.empty());
  EXPECT_TRUE(testing::read_file(dir.file("anvil.idx")) == want_idx) << ".idx differs";
  EXPECT_TRUE(testing::read_file(dir.file("anvil.bin")) == want_bin) << ".bin differs";
}

TEST_P(MegatronFixture, ReaderReadsNumpyFilesExactly) {
  const std::string name = GetParam();
  const std::string fixture = testing::fixture_dir() + "/megatron_" + name;
  auto ds = IndexedDataset::open(fixture);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->dtype(), name == "u16" ? TokenDType::kU16 : TokenDType::kI32);
  expect_contents(**ds, testing::read_listing(fixture + ".txt"));
}

INSTANTIATE_TEST_SUITE_P(Variants, MegatronFixture, ::testing::Values("u16", "i32"));

// ---- corrupt and missing inputs ------------------------------------------------------------

// A copy of the u16 fixture in a scratch dir, to be damaged by each test.
class CorruptIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string fixture = testing::fixture_dir() + "/megatron_u16";
    idx_ = testing::read_file(fixture + ".idx");
    bin_ = testing::read_file(fixture + ".bin");
    n_ = 9;  // sequences in the fixture
    ASSERT_EQ(idx_.size(), 34u + 12u * n_ + 8u * 7u);
  }
  // Writes the (modified) files and opens them; the open must fail.
  absl::Status open_modified() {
    testing::write_file(prefix() + ".idx", idx_);
    testing::write_file(prefix() + ".bin", bin_);
    auto ds = IndexedDataset::open(prefix());
    EXPECT_FALSE(ds.ok()) << "corrupt dataset opened";
    return ds.status();
  }
  std::string prefix() const { return dir_.file("bad"); }
  template <typename T>
  void put(size_t offset, T v) {
    std::memcpy(idx_.data() + offset, &v, sizeof(T));
  }
  size_t pointers_at() const { return 34 + 4 * n_; }
  size_t doc_idx_at() const { return 34 + 12 * n_; }

  ScratchDir dir_;
  std::string idx_, bin_;
  size_t n_ = 0;
};

void expect_error(const absl::Status& s, absl::StatusCode code, const std::string& file,
                  const std::string& what) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(file));
  EXPECT_THAT(std::string(s.message()), HasSubstr(what));
}

TEST_F(CorruptIndex, TruncatedIndex) {
  idx_.resize(idx_.size() - 4);
  const absl::Status s = open_modified();
  expect_error(s, absl::StatusCode::kDataLoss, "bad.idx", "truncated");
  EXPECT_THAT(std::string(s.message()), HasSubstr("9 sequences"));
}

TEST_F(CorruptIndex, TruncatedHeader) {
  idx_.resize(20);
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "truncated header");
}

TEST_F(CorruptIndex, TrailingBytes) {
  idx_.append(3, '\0');
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "size mismatch");
}

TEST_F(CorruptIndex, BadMagic) {
  idx_[2] = 'X';
  expect_error(open_modified(), absl::StatusCode::kInvalidArgument, "bad.idx", "bad magic");
}

TEST_F(CorruptIndex, LegacyFormat) {
  idx_.replace(0, 8, std::string("TNTIDX\0\0", 8));
  expect_error(open_modified(), absl::StatusCode::kInvalidArgument, "bad.idx", "TNTIDX");
}

TEST_F(CorruptIndex, WrongVersion) {
  put<uint64_t>(9, 2);
  expect_error(open_modified(), absl::StatusCode::kInvalidArgument, "bad.idx",
               "unsupported version 2");
}

TEST_F(CorruptIndex, UnknownDType) {
  idx_[17] = 9;
  expect_error(open_modified(), absl::StatusCode::kInvalidArgument, "bad.idx",
               "unknown dtype code 9");
  idx_[17] = 0;
  expect_error(open_modified(), absl::StatusCode::kInvalidArgument, "bad.idx",
               "unknown dtype code 0");
  idx_[17] = 7;
  expect_error(open_modified(), absl::StatusCode::kInvalidArgument, "bad.idx",
               "dtype code 7 is a float");
}

// float64 token data (code 6) holding 1.5 would be read as id 1: token ids are integers.
TEST_F(CorruptIndex, Float64TokensAreRefused) {
  idx_[17] = 6;
  // A well-formed float64 file: the fixture's 120 tokens as 1.5, its pointers in 8-byte items.
  bin_.assign(8 * 120, '\0');
  const double v = 1.5;
  for (size_t i = 0; i < 120; ++i) std::memcpy(bin_.data() + 8 * i, &v, 8);
  for (size_t q = 0; q < n_; ++q) {
    int64_t p = 0;
    std::memcpy(&p, idx_.data() + pointers_at() + 8 * q, 8);
    put<int64_t>(pointers_at() + 8 * q, p * 4);  // u16 byte offsets x 4
  }
  const absl::Status s = open_modified();
  expect_error(s, absl::StatusCode::kInvalidArgument, "bad.idx", "dtype code 6 is float64");
  EXPECT_THAT(std::string(s.message()), HasSubstr("token ids are integers"));
}

TEST_F(CorruptIndex, HugeCountsInHeader) {
  put<uint64_t>(18, ~uint64_t{0});
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "corrupt header");
}

TEST_F(CorruptIndex, DocIdxMustStartAtZeroAndEndAtN) {
  put<int64_t>(doc_idx_at(), 1);
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "doc_idx[0] = 1");
  SetUp();
  put<int64_t>(doc_idx_at() + 8 * 6, 8);
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "doc_idx[6] = 8");
}

TEST_F(CorruptIndex, DocIdxMustBeMonotonic) {
  put<int64_t>(doc_idx_at() + 8 * 2, 0);
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "not monotonic");
}

TEST_F(CorruptIndex, InconsistentPointer) {
  put<int64_t>(pointers_at() + 8 * 3, 1000);
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "pointers[3]");
}

TEST_F(CorruptIndex, NegativeSize) {
  put<int32_t>(34 + 4 * 2, -5);
  expect_error(open_modified(), absl::StatusCode::kDataLoss, "bad.idx", "sizes[2] = -5");
}

TEST_F(CorruptIndex, BinShorterThanPointersSay) {
  bin_.resize(bin_.size() - 2);
  const absl::Status s = open_modified();
  expect_error(s, absl::StatusCode::kDataLoss, "bad.bin", "truncated");
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::to_string(bin_.size())));
}

TEST_F(CorruptIndex, MissingBin) {
  testing::write_file(prefix() + ".idx", idx_);
  auto ds = IndexedDataset::open(prefix());
  expect_error(ds.status(), absl::StatusCode::kNotFound, "bad.bin", "No such file");
}

TEST_F(CorruptIndex, MissingIdx) {
  testing::write_file(prefix() + ".bin", bin_);
  auto ds = IndexedDataset::open(prefix());
  expect_error(ds.status(), absl::StatusCode::kNotFound, "bad.idx", "No such file");
}

TEST(IndexedDatasetDeathTest, ReadOutOfBoundsChecks) {
  auto ds = IndexedDataset::open(testing::fixture_dir() + "/megatron_u16");
  ASSERT_TRUE(ds.ok()) << ds.status();
  int32_t out[8];
  EXPECT_DEATH((void)(*ds)->read(0, 3, 3, out), "CHECK failed");
  EXPECT_DEATH((void)(*ds)->read(9, 0, 1, out), "CHECK failed");
}

}  // namespace
}  // namespace anvil::io
