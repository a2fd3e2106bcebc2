// ProcessGrid: rank arithmetic (TP fastest, then DP, then PP), every group kind partitions the
// world consistently (each member computes the same member list and id), the embedding group
// pairs the first and last stage, and invalid layouts are errors naming the numbers.
// Pure arithmetic: every rank runs the same checks without communicating.
#include "parallel/grid.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::parallel {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

ProcessGrid make(int world, int rank, int tp, int pp, int dp = 0) {
  auto g = ProcessGrid::create(world, rank, tp, pp, dp);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(ProcessGridTest, MegatronRankOrderTp2Dp2Pp2) {
  // rank = tp + dp * 2 + pp * 4
  const ProcessGrid g = make(8, 5, 2, 2);
  EXPECT_EQ(g.dp_size(), 2);
  EXPECT_EQ(g.tp_rank(), 1);
  EXPECT_EQ(g.dp_rank(), 0);
  EXPECT_EQ(g.pp_rank(), 1);
  EXPECT_TRUE(g.is_last_stage());
  EXPECT_FALSE(g.is_first_stage());
  EXPECT_THAT(g.tp_group().ranks, ElementsAre(4, 5));
  EXPECT_THAT(g.dp_group().ranks, ElementsAre(5, 7));
  EXPECT_THAT(g.pp_group().ranks, ElementsAre(1, 5));
  EXPECT_THAT(g.embedding_group().ranks, ElementsAre(1, 5));
  EXPECT_EQ(g.embedding_group().index, 1);
  EXPECT_THAT(g.world_group().ranks, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(g.tp_group().index, 1);
  EXPECT_EQ(g.dp_group().index, 0);
  EXPECT_EQ(g.pp_group().index, 1);
  EXPECT_EQ(g.rank_of(1, 0, 1), 5);
  EXPECT_EQ(g.describe(), "rank 5 of 8: tp 1/2, dp 0/2, pp 1/2");
  EXPECT_EQ(g.dp_group().describe(), "dp group 3 of ranks {5, 7}");
}

TEST(ProcessGridTest, MiddleStagesAreNotInTheEmbeddingGroup) {
  // PP 4 on world 4: stages 1 and 2 hold no embedding.
  for (int r = 0; r < 4; ++r) {
    const ProcessGrid g = make(4, r, 1, 4);
    if (r == 0 || r == 3) {
      EXPECT_THAT(g.embedding_group().ranks, ElementsAre(0, 3)) << r;
      EXPECT_EQ(g.embedding_group().index, r == 0 ? 0 : 1);
    } else {
      EXPECT_FALSE(g.embedding_group().is_member()) << r;
      EXPECT_TRUE(g.embedding_group().ranks.empty());
      EXPECT_EQ(g.embedding_group().id, -1);
    }
  }
  // PP 1: the one stage is first and last; its embedding group is itself.
  const ProcessGrid g = make(4, 2, 2, 1);
  EXPECT_THAT(g.embedding_group().ranks, ElementsAre(2));
  EXPECT_EQ(g.embedding_group().index, 0);
}

// For every layout up to 8 ranks: each kind of group partitions the world, all members agree on
// the member list and the id, ids differ between groups, and the coordinates match the formula.
TEST(ProcessGridTest, GroupsPartitionTheWorldForEveryLayout) {
  for (int world = 1; world <= 8; ++world) {
    for (int tp = 1; tp <= world; ++tp) {
      for (int pp = 1; pp <= world; ++pp) {
        if (world % (tp * pp) != 0) continue;
        const int dp = world / (tp * pp);
        SCOPED_TRACE(testing::Message() << "world " << world << " tp " << tp << " pp " << pp);
        std::vector<ProcessGrid> grids;
        for (int r = 0; r < world; ++r) grids.push_back(make(world, r, tp, pp));
        for (int r = 0; r < world; ++r) {
          const ProcessGrid& g = grids[r];
          EXPECT_EQ(r, g.tp_rank() + g.dp_rank() * tp + g.pp_rank() * tp * dp);
          EXPECT_EQ(g.rank_of(g.tp_rank(), g.dp_rank(), g.pp_rank()), r);
        }
        auto check_kind = [&](const char* kind, auto get, int expect_size) -> std::set<int> {
          std::map<int, std::vector<int>> by_id;  // id -> member list
          std::set<int> covered;
          for (int r = 0; r < world; ++r) {
            const ProcessGroup& grp = get(grids[r]);
            EXPECT_EQ(grp.name, kind);
            if (!grp.is_member()) continue;
            EXPECT_EQ(grp.size(), expect_size) << kind << " rank " << r;
            EXPECT_EQ(grp.ranks[grp.index], r) << kind;
            auto [it, fresh] = by_id.emplace(grp.id, grp.ranks);
            if (!fresh) {
              EXPECT_EQ(it->second, grp.ranks) << kind << " id " << grp.id;
            }
            EXPECT_TRUE(covered.insert(r).second);
          }
          // Distinct ids hold disjoint member lists.
          std::set<int> seen;
          for (const auto& [id, ranks] : by_id) {
            for (int m : ranks) EXPECT_TRUE(seen.insert(m).second) << kind << " rank " << m;
          }
          return covered;
        };
        EXPECT_EQ(check_kind(
                      "tp", [](const ProcessGrid& g) -> auto& { return g.tp_group(); }, tp)
                      .size(),
                  static_cast<size_t>(world));
        EXPECT_EQ(check_kind(
                      "dp", [](const ProcessGrid& g) -> auto& { return g.dp_group(); }, dp)
                      .size(),
                  static_cast<size_t>(world));
        EXPECT_EQ(check_kind(
                      "pp", [](const ProcessGrid& g) -> auto& { return g.pp_group(); }, pp)
                      .size(),
                  static_cast<size_t>(world));
        // Embedding: the first and last stage of every pipeline.
        const std::set<int> emb = check_kind(
            "embedding", [](const ProcessGrid& g) -> auto& { return g.embedding_group(); },
            pp > 1 ? 2 : 1);
        EXPECT_EQ(emb.size(), static_cast<size_t>(tp * dp * (pp > 1 ? 2 : 1)));
        // TP groups are consecutive ranks (one node's NVLink domain).
        const ProcessGroup& t = grids[world - 1].tp_group();
        for (int i = 1; i < t.size(); ++i) EXPECT_EQ(t.ranks[i], t.ranks[i - 1] + 1);
      }
    }
  }
}

TEST(ProcessGridTest, InferredAndExplicitDp) {
  EXPECT_EQ(make(8, 0, 2, 2).dp_size(), 2);
  EXPECT_EQ(make(8, 0, 2, 2, 2).dp_size(), 2);
  EXPECT_EQ(make(1, 0, 1, 1).dp_size(), 1);
}

TEST(ProcessGridTest, ErrorsNameTheNumbers) {
  auto e = ProcessGrid::create(6, 0, 4, 1);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("world size 6 is not divisible by tp * pp = 4 * 1 = 4"));
  e = ProcessGrid::create(8, 0, 2, 2, 4);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("tp * dp * pp = 2 * 4 * 2 = 16 does not equal the world size 8"));
  e = ProcessGrid::create(4, 4, 1, 1);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("rank 4 is outside [0, 4)"));
  e = ProcessGrid::create(4, 0, 0, 1);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("got tp 0, pp 1, dp 0"));
}

}  // namespace
}  // namespace anvil::parallel
