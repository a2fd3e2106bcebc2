// The kill switch's check (see kill_switch.h).
#include "model/train/kill_switch.h"

#include <filesystem>
#include <system_error>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::model {

bool kill_switch_found(parallel::Comm* world, const std::string& path) {
  std::error_code ec;
  double found = !path.empty() && std::filesystem::exists(path, ec) ? 1.0 : 0.0;
  if (world != nullptr) {
    engine::Stream s = engine::Stream::cpu();
    world->all_reduce(engine::make_view(&found, engine::DType::kF64, engine::Device::kCpu, {1}),
                      parallel::ReduceOp::kMax, s);
  }
  return found > 0;
}

}  // namespace anvil::model
