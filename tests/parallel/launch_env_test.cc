// Launcher detection from environment maps: Open MPI, PMI (MPICH/Hydra), srun, none; precedence
// (mpirun inside a SLURM allocation is Open MPI's world), a batch script without srun is one
// process, and malformed values are errors naming the variable.
#include "parallel/launch_env.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::parallel {
namespace {

using testing::HasSubstr;

LaunchInfo ok(const EnvMap& env) {
  auto info = launch_info_from_env(env);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? *info : LaunchInfo{};
}

std::string error(const EnvMap& env) {
  auto info = launch_info_from_env(env);
  EXPECT_FALSE(info.ok());
  return info.ok() ? "" : std::string(info.status().message());
}

TEST(LaunchEnvTest, NoLauncherIsRankZeroOfOne) {
  const LaunchInfo i = ok({{"HOME", "/root"}, {"PATH", "/usr/bin"}});
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.world, 1);
  EXPECT_EQ(i.local_rank, 0);
  EXPECT_EQ(i.launcher, "none");
  EXPECT_FALSE(i.launched());
}

TEST(LaunchEnvTest, OpenMpi) {
  const LaunchInfo i = ok({{"OMPI_COMM_WORLD_RANK", "5"},
                           {"OMPI_COMM_WORLD_SIZE", "8"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.launcher, "openmpi");
  EXPECT_TRUE(i.launched());
}

TEST(LaunchEnvTest, SingleRankMpirunIsLaunched) {
  // mpirun -np 1 still needs MPI_Init (and NCCL's bootstrap path).
  const LaunchInfo i = ok({{"OMPI_COMM_WORLD_RANK", "0"},
                           {"OMPI_COMM_WORLD_SIZE", "1"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(i.world, 1);
  EXPECT_TRUE(i.launched());
}

TEST(LaunchEnvTest, Pmi) {
  LaunchInfo i = ok({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "3"}});
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.world, 4);
  EXPECT_EQ(i.local_rank, 3);
  EXPECT_EQ(i.launcher, "pmi");
  i = ok({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"PMI_LOCAL_RANK", "0"}});
  EXPECT_EQ(i.local_rank, 0);
  i = ok({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}});  // no local rank: 0
  EXPECT_EQ(i.local_rank, 0);
}

TEST(LaunchEnvTest, Srun) {
  const LaunchInfo i = ok({{"SLURM_PROCID", "9"},
                           {"SLURM_NTASKS", "16"},
                           {"SLURM_STEP_NUM_TASKS", "12"},
                           {"SLURM_LOCALID", "1"},
                           {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(i.rank, 9);
  EXPECT_EQ(i.world, 12);  // the step's tasks, not the allocation's
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.launcher, "slurm");
  // Older srun without SLURM_STEP_NUM_TASKS: SLURM_NTASKS.
  const LaunchInfo j = ok({{"SLURM_PROCID", "3"},
                           {"SLURM_NTASKS", "4"},
                           {"SLURM_LOCALID", "3"},
                           {"SLURM_STEPID", "2"}});
  EXPECT_EQ(j.world, 4);
  EXPECT_EQ(j.rank, 3);
}

TEST(LaunchEnvTest, BatchScriptWithoutSrunIsOneProcess) {
  const LaunchInfo i = ok({{"SLURM_PROCID", "0"},
                           {"SLURM_NTASKS", "8"},
                           {"SLURM_LOCALID", "0"},
                           {"SLURM_JOB_ID", "1234"}});
  EXPECT_EQ(i.world, 1);
  EXPECT_FALSE(i.launched());
}

TEST(LaunchEnvTest, MpirunInsideASlurmAllocationUsesOpenMpi) {
  const LaunchInfo i = ok({{"SLURM_PROCID", "0"},
                           {"SLURM_NTASKS", "8"},
                           {"SLURM_STEP_NUM_TASKS", "1"},
                           {"SLURM_LOCALID", "0"},
                           {"OMPI_COMM_WORLD_RANK", "6"},
                           {"OMPI_COMM_WORLD_SIZE", "8"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}});
  EXPECT_EQ(i.launcher, "openmpi");
  EXPECT_EQ(i.rank, 6);
  EXPECT_EQ(i.world, 8);
  EXPECT_EQ(i.local_rank, 2);
}

TEST(LaunchEnvTest, ErrorsNameTheVariable) {
  EXPECT_THAT(error({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}),
              HasSubstr("OMPI_COMM_WORLD_SIZE is not set"));
  EXPECT_THAT(error({{"OMPI_COMM_WORLD_RANK", "one"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}),
              HasSubstr("OMPI_COMM_WORLD_RANK=\"one\" is not an integer"));
  EXPECT_THAT(error({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}}),
              HasSubstr("PMI_RANK=4 is outside [0, PMI_SIZE=4)"));
  EXPECT_THAT(error({{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}}),
              HasSubstr("SLURM_LOCALID is not set"));
  EXPECT_THAT(error({{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_LOCALID", "2"}}),
              HasSubstr("SLURM_LOCALID=2 must lie in [0, SLURM_PROCID=1]"));
}

TEST(LaunchEnvTest, EnvMapParsesEnvp) {
  const char* envp[] = {"A=1", "B=x=y", "EMPTY=", "NOEQUALS", nullptr};
  const EnvMap m = env_map(envp);
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at("A"), "1");
  EXPECT_EQ(m.at("B"), "x=y");
  EXPECT_EQ(m.at("EMPTY"), "");
  EXPECT_TRUE(env_map(nullptr).empty());
}

}  // namespace
}  // namespace anvil::parallel
