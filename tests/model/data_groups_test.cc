// [data] *_weighted_split_paths groups, Megatron-DeepSpeed's "NAME: W START:END PREFIX, ..."
// (several groups separated by ';'): parsed fields, and one-line errors for malformed groups.
#include "model/train/data_groups.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

TEST(DataGroupsTest, ParsesGroups) {
  auto g = parse_data_groups("A: 0.6 0:0.6 data/a, 0.4 0.2:1 data/b ; B:1 0.5:1 data/c");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 2u);
  const DataGroup& a = (*g)[0];
  EXPECT_EQ(a.name, "A");
  EXPECT_EQ(a.weights, (std::vector<double>{0.6, 0.4}));
  EXPECT_EQ(a.prefixes, (std::vector<std::string>{"data/a", "data/b"}));
  EXPECT_EQ(a.ranges[1], std::make_pair(0.2, 1.0));
  EXPECT_EQ((*g)[1].name, "B");
  EXPECT_EQ((*g)[1].ranges[0], std::make_pair(0.5, 1.0));
  EXPECT_TRUE(parse_data_groups("")->empty());
}

TEST(DataGroupsTest, MalformedGroupsAreNamed) {
  auto error = [](const std::string& text) {
    auto g = parse_data_groups(text);
    EXPECT_FALSE(g.ok()) << text;
    return g.ok() ? std::string() : std::string(g.status().message());
  };
  EXPECT_THAT(error("data/a"), HasSubstr("no NAME:"));
  EXPECT_THAT(error("1 0:1 data/a"), HasSubstr("one word"));  // the name would be "1 0"
  EXPECT_THAT(error("A: 1 data/a"), HasSubstr("'1 data/a' is not WEIGHT START:END PREFIX"));
  EXPECT_THAT(error("A: x 0:1 data/a"), HasSubstr("weight 'x'"));
  EXPECT_THAT(error("A: 1 0.5:0.5 data/a"), HasSubstr("range '0.5:0.5'"));
  EXPECT_THAT(error("A: 1 0:1.5 data/a"), HasSubstr("range '0:1.5'"));
  EXPECT_THAT(error("A: 1 0:1 a; A: 1 0:1 b"), HasSubstr("used twice"));
  EXPECT_THAT(error("my set: 1 0:1 a"), HasSubstr("one word"));
}

}  // namespace
}  // namespace anvil::model
