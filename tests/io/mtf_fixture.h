// tests/io/fixtures/mtf_packing.txt (scripts/make_mtf_fixture.py: Megatron-DeepSpeed's
// DecoderPackedMTFDataset index and pack_samples under numpy), read for mtf_packing_test and
// mtf_dataset_test: per case its parameters, the pairs' input / target sizes (pair d's tokens
// are 1000 d + t for inputs and 1000 d + 500 + t for targets), the concatenated shuffles, the
// [start, end) rows and three packed rows.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::io::testing_mtf {

struct Row {
  int64_t k = 0;
  std::vector<int32_t> tokens, segment_ids, is_inputs;
};

struct FixtureCase {
  std::string name;
  std::map<std::string, int64_t> params;
  std::vector<int64_t> inputs, targets, shuffle, samples;
  std::vector<Row> rows;
};

inline std::string fixture_path() {
  const std::string here = __FILE__;
  const std::string beside = here.substr(0, here.rfind('/')) + "/fixtures/mtf_packing.txt";
  if (std::ifstream(beside).good()) return beside;
  return "tests/io/fixtures/mtf_packing.txt";  // from the source root (ctest)
}

template <typename T>
inline std::vector<T> rest(std::istringstream& in) {
  std::vector<T> v;
  T x;
  while (in >> x) v.push_back(x);
  return v;
}

inline std::vector<FixtureCase> read_fixture() {
  std::ifstream in(fixture_path());
  EXPECT_TRUE(in.good()) << fixture_path();
  std::vector<FixtureCase> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    if (tag == "case") {
      out.emplace_back();
      ls >> out.back().name;
    } else if (tag == "param") {
      std::string key;
      int64_t v = 0;
      ls >> key >> v;
      out.back().params[key] = v;
    } else if (tag == "inputs") {
      out.back().inputs = rest<int64_t>(ls);
    } else if (tag == "targets") {
      out.back().targets = rest<int64_t>(ls);
    } else if (tag == "shuffle") {
      out.back().shuffle = rest<int64_t>(ls);
    } else if (tag == "samples") {
      out.back().samples = rest<int64_t>(ls);
    } else if (tag == "row") {
      out.back().rows.emplace_back();
      ls >> out.back().rows.back().k;
    } else if (tag == "tokens") {
      out.back().rows.back().tokens = rest<int32_t>(ls);
    } else if (tag == "segment_ids") {
      out.back().rows.back().segment_ids = rest<int32_t>(ls);
    } else if (tag == "is_inputs") {
      out.back().rows.back().is_inputs = rest<int32_t>(ls);
    }
  }
  return out;
}

}  // namespace anvil::io::testing_mtf
