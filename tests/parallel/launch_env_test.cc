// Launcher detection from environment maps: Open MPI, PMI (MPICH/Hydra), srun, torchrun /
// deepspeed, none; precedence (mpirun inside a SLURM allocation is Open MPI's world, deepspeed's
// MPI backend is MPI, torchrun under srun is torchrun), a batch script without srun is one
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

// What torchrun exports for global rank 5 of 8 on the second of two 4-process nodes.
EnvMap torchrun_env() {
  return {{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29500"},
          {"GROUP_RANK", "1"}};
}

TEST(LaunchEnvTest, Torchrun) {
  const LaunchInfo i = ok(torchrun_env());
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world, 8);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.master_addr, "node0");
  EXPECT_EQ(i.master_port, 29500);
  EXPECT_EQ(i.store_port, 29500);  // the deepspeed launcher: nobody else serves MASTER_PORT
  EXPECT_TRUE(i.launched());
  EXPECT_FALSE(i.uses_mpi());
  // The deepspeed launcher (pdsh/local) sets the same variables, without LOCAL_WORLD_SIZE.
  EnvMap ds = torchrun_env();
  ds.erase("LOCAL_WORLD_SIZE");
  ds.erase("GROUP_RANK");
  EXPECT_EQ(ok(ds).launcher, "torchrun");
  // No LOCAL_RANK: 0.
  ds.erase("LOCAL_RANK");
  EXPECT_EQ(ok(ds).local_rank, 0);
}

TEST(LaunchEnvTest, StorePortBesideTorchrunsAgentStore) {
  // torchrun's agent serves torch's TCPStore on MASTER_PORT: anvil's store takes the next port.
  EnvMap env = torchrun_env();
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  LaunchInfo i = ok(env);
  EXPECT_EQ(i.master_port, 29500);
  EXPECT_EQ(i.store_port, 29501);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_EQ(ok(env).store_port, 29500);
  // ANVIL_STORE_PORT wins.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env["ANVIL_STORE_PORT"] = "40000";
  EXPECT_EQ(ok(env).store_port, 40000);
  env["ANVIL_STORE_PORT"] = "x";
  EXPECT_THAT(error(env), HasSubstr("ANVIL_STORE_PORT=\"x\" is not a TCP port number"));
  env.erase("ANVIL_STORE_PORT");
  env["MASTER_PORT"] = "65535";
  EXPECT_THAT(error(env), HasSubstr("set ANVIL_STORE_PORT"));
}

TEST(LaunchEnvTest, TorchrunWorldOfOneNeedsNoMaster) {
  const LaunchInfo i = ok({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.master_addr, "");
  EXPECT_EQ(i.master_port, 0);
  const LaunchInfo j = ok(
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(j.master_addr, "127.0.0.1");
  EXPECT_EQ(j.master_port, 1234);
}

TEST(LaunchEnvTest, MpiWinsOverTorchrunVariables) {
  // deepspeed --launcher openmpi: mpirun starts the ranks and RANK etc. are exported too.
  EnvMap env = torchrun_env();
  env["OMPI_COMM_WORLD_RANK"] = "5";
  env["OMPI_COMM_WORLD_SIZE"] = "8";
  env["OMPI_COMM_WORLD_LOCAL_RANK"] = "1";
  LaunchInfo i = ok(env);
  EXPECT_EQ(i.launcher, "openmpi");
  EXPECT_TRUE(i.uses_mpi());
  EXPECT_EQ(i.master_addr, "");
  // MPICH / Intel MPI (Hydra).
  env = torchrun_env();
  env["PMI_RANK"] = "5";
  env["PMI_SIZE"] = "8";
  EXPECT_EQ(ok(env).launcher, "pmi");
}

TEST(LaunchEnvTest, TorchrunWinsOverSrun) {
  // srun --ntasks-per-node=1 torchrun ...: SLURM_PROCID is the node's index (1 of 2 tasks).
  EnvMap env = torchrun_env();
  env["SLURM_PROCID"] = "1";
  env["SLURM_STEP_NUM_TASKS"] = "2";
  env["SLURM_LOCALID"] = "0";
  env["SLURM_STEP_ID"] = "0";
  const LaunchInfo i = ok(env);
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.world, 8);
}

TEST(LaunchEnvTest, TorchrunErrorsNameTheVariable) {
  auto with = [](const std::string& key, const std::string& value) {
    EnvMap env = torchrun_env();
    env[key] = value;
    return env;
  };
  auto without = [](const std::string& key) {
    EnvMap env = torchrun_env();
    env.erase(key);
    return env;
  };
  EXPECT_THAT(error(with("RANK", "8")), HasSubstr("RANK=8 is outside [0, WORLD_SIZE=8)"));
  EXPECT_THAT(error(with("RANK", "-1")), HasSubstr("RANK=-1 is outside [0, WORLD_SIZE=8)"));
  EXPECT_THAT(error(with("WORLD_SIZE", "0")), HasSubstr("is outside [0, WORLD_SIZE=0)"));
  EXPECT_THAT(error(with("RANK", "five")), HasSubstr("RANK=\"five\" is not an integer"));
  EXPECT_THAT(error(without("WORLD_SIZE")), HasSubstr("torchrun launch: WORLD_SIZE is not set"));
  EXPECT_THAT(error(without("RANK")), HasSubstr("torchrun launch: RANK is not set"));
  EXPECT_THAT(error(with("LOCAL_RANK", "4")),
              HasSubstr("LOCAL_RANK=4 is outside [0, LOCAL_WORLD_SIZE=4)"));
  EXPECT_THAT(error(with("MASTER_PORT", "http")),
              HasSubstr("MASTER_PORT=\"http\" is not a TCP port number (1-65535)"));
  EXPECT_THAT(error(with("MASTER_PORT", "65536")), HasSubstr("MASTER_PORT=\"65536\""));
  EXPECT_THAT(error(with("MASTER_PORT", "0")), HasSubstr("MASTER_PORT=\"0\""));
  EXPECT_THAT(error(without("MASTER_ADDR")),
              HasSubstr("WORLD_SIZE=8 needs MASTER_ADDR and MASTER_PORT (rank 0's rendezvous "
                        "address), but MASTER_ADDR is not set"));
  EXPECT_THAT(error(with("MASTER_ADDR", "")), HasSubstr("MASTER_ADDR is not set"));
  EXPECT_THAT(error(without("MASTER_PORT")), HasSubstr("but MASTER_PORT is not set"));
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "h"}}),
              HasSubstr("MASTER_ADDR=h is set but MASTER_PORT is not"));
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
