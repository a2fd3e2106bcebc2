// Launcher detection from an environment-variable map (see launch_env.h).
#include "parallel/launch_env.h"

#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::parallel {
namespace {

std::optional<std::string> get(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

// The integer value of `name`, or InvalidArgument naming the launcher, variable and value.
absl::StatusOr<int> get_int(const EnvMap& env, const std::string& launcher,
                            const std::string& name) {
  std::optional<std::string> v = get(env, name);
  if (!v) {
    return absl::InvalidArgumentError(
        absl::StrCat(launcher, " launch: ", name, " is not set (the other ", launcher,
                     " variables are); cannot tell this process's rank"));
  }
  int out = 0;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(launcher, " launch: ", name, "=\"", *v, "\" is not an integer"));
  }
  return out;
}

absl::StatusOr<LaunchInfo> read(const EnvMap& env, const std::string& launcher,
                                const std::string& rank_var, const std::string& world_var,
                                const std::string& local_var /* "" = local rank 0 */) {
  LaunchInfo info;
  info.launcher = launcher;
  absl::StatusOr<int> r = get_int(env, launcher, rank_var);
  if (!r.ok()) return r.status();
  absl::StatusOr<int> w = get_int(env, launcher, world_var);
  if (!w.ok()) return w.status();
  info.rank = *r;
  info.world = *w;
  if (!local_var.empty()) {
    absl::StatusOr<int> l = get_int(env, launcher, local_var);
    if (!l.ok()) return l.status();
    info.local_rank = *l;
  }
  if (info.world < 1 || info.rank < 0 || info.rank >= info.world) {
    return absl::InvalidArgumentError(absl::StrFormat("%s launch: %s=%d is outside [0, %s=%d)",
                                                      launcher, rank_var, info.rank, world_var,
                                                      info.world));
  }
  if (info.local_rank < 0 || info.local_rank > info.rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s launch: local rank %s=%d must lie in [0, %s=%d]", launcher, local_var,
                        info.local_rank, rank_var, info.rank));
  }
  return info;
}

// The TCP port in variable `name` (set), or InvalidArgument naming it.
absl::StatusOr<int> port_number(const EnvMap& env, const char* name) {
  const std::string v = *get(env, name);
  int p = 0;
  if (!absl::SimpleAtoi(v, &p) || p < 1 || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("torchrun launch: ", name, "=\"", v, "\" is not a TCP port number (1-65535)"));
  }
  return p;
}

// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (see launch_env.h).
absl::StatusOr<LaunchInfo> read_torchrun(const EnvMap& env) {
  const char* kLauncher = "torchrun";
  absl::StatusOr<LaunchInfo> info =
      read(env, kLauncher, "RANK", "WORLD_SIZE", get(env, "LOCAL_RANK") ? "LOCAL_RANK" : "");
  if (!info.ok()) return info.status();
  if (get(env, "LOCAL_WORLD_SIZE")) {
    absl::StatusOr<int> lw = get_int(env, kLauncher, "LOCAL_WORLD_SIZE");
    if (!lw.ok()) return lw.status();
    if (info->local_rank >= *lw) {
      return absl::InvalidArgumentError(
          absl::StrFormat("torchrun launch: LOCAL_RANK=%d is outside [0, LOCAL_WORLD_SIZE=%d)",
                          info->local_rank, *lw));
    }
  }
  std::optional<std::string> addr = get(env, "MASTER_ADDR");
  std::optional<std::string> port = get(env, "MASTER_PORT");
  if (port) {
    ANVIL_ASSIGN_OR_RETURN(info->master_port, port_number(env, "MASTER_PORT"));
    info->store_port = info->master_port;
    if (get(env, "ANVIL_STORE_PORT")) {
      ANVIL_ASSIGN_OR_RETURN(info->store_port, port_number(env, "ANVIL_STORE_PORT"));
    } else if (get(env, "TORCHELASTIC_USE_AGENT_STORE") == std::optional<std::string>("True")) {
      info->store_port = info->master_port + 1;
      if (info->store_port > 65535) {
        return absl::InvalidArgumentError(
            "torchrun launch: MASTER_PORT=65535 leaves no port for anvil's store next to "
            "torchrun's (TORCHELASTIC_USE_AGENT_STORE=True); set ANVIL_STORE_PORT");
      }
    }
  }
  if (addr && addr->empty()) addr.reset();
  if (addr) info->master_addr = *addr;
  if (info->world > 1 && (!addr || !port)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "torchrun launch: WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (rank 0's rendezvous "
        "address), but %s not set",
        info->world,
        !addr && !port ? "neither is"
        : !addr        ? "MASTER_ADDR is"
                       : "MASTER_PORT is"));
  }
  if (addr && !port) {
    return absl::InvalidArgumentError(
        absl::StrCat("torchrun launch: MASTER_ADDR=", *addr, " is set but MASTER_PORT is not"));
  }
  return info;
}

}  // namespace

absl::StatusOr<LaunchInfo> launch_info_from_env(const EnvMap& env) {
  if (get(env, "OMPI_COMM_WORLD_RANK") || get(env, "OMPI_COMM_WORLD_SIZE")) {
    return read(env, "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK");
  }
  if (get(env, "PMI_RANK") || get(env, "PMI_SIZE")) {
    const char* local = get(env, "MPI_LOCALRANKID")  ? "MPI_LOCALRANKID"
                        : get(env, "PMI_LOCAL_RANK") ? "PMI_LOCAL_RANK"
                                                     : "";
    return read(env, "pmi", "PMI_RANK", "PMI_SIZE", local);
  }
  if (get(env, "RANK") || get(env, "WORLD_SIZE")) return read_torchrun(env);
  // srun sets the step variables; a batch script's own environment has only job-level ones.
  const bool srun_step =
      get(env, "SLURM_STEP_NUM_TASKS") || get(env, "SLURM_STEP_ID") || get(env, "SLURM_STEPID");
  if (get(env, "SLURM_PROCID") && srun_step) {
    const char* world = get(env, "SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    return read(env, "slurm", "SLURM_PROCID", world, "SLURM_LOCALID");
  }
  return LaunchInfo{};
}

EnvMap env_map(const char* const* envp) {
  EnvMap out;
  if (envp == nullptr) return out;
  for (const char* const* e = envp; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    out.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return out;
}

}  // namespace anvil::parallel
