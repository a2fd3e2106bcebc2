// Shared helpers of the io tests: a scratch directory, whole-file read/write, the fixture
// directory and the fixture's document listing (scripts/make_idx_fixture.py).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::io::testing {

// A fresh directory under the gtest temp dir, removed (with its files) at destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = ::testing::TempDir() + "anvil_io_XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~ScratchDir() {
    const std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "could not remove " << path_;
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(f.good()) << "cannot write " << path;
}

inline bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// tests/io/fixtures, found next to this header (absolute in CMake builds), else from the
// repository root (CTest's working directory).
inline std::string fixture_dir() {
  std::string here = __FILE__;
  const size_t slash = here.rfind('/');
  const std::string dir =
      (slash == std::string::npos ? std::string(".") : here.substr(0, slash)) + "/fixtures";
  if (file_exists(dir)) return dir;
  return "tests/io/fixtures";
}

// Documents as lists of sequences.
using Docs = std::vector<std::vector<std::vector<int32_t>>>;

// Parses the fixture listing: one sequence per line, a blank line ends a document.
inline Docs read_listing(const std::string& path) {
  std::istringstream in(read_file(path));
  Docs docs;
  std::vector<std::vector<int32_t>> doc;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (!doc.empty()) docs.push_back(doc);
      doc.clear();
      continue;
    }
    std::istringstream ls(line);
    std::vector<int32_t> seq;
    int64_t t;
    while (ls >> t) seq.push_back(static_cast<int32_t>(t));
    doc.push_back(seq);
  }
  if (!doc.empty()) docs.push_back(doc);
  return docs;
}

}  // namespace anvil::io::testing
