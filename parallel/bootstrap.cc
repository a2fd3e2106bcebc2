// BroadcastBytes over a CPU communicator or through the rendezvous store (see bootstrap.h).
#include "parallel/bootstrap.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/stream.h"

namespace anvil::parallel {

BroadcastBytes broadcast_over(Comm& comm) {
  return [&comm](void* data, size_t bytes) {
    engine::Stream cpu = engine::Stream::cpu();
    comm.broadcast(engine::make_view(data, engine::DType::kU8, engine::Device::kCpu,
                                     {static_cast<int64_t>(bytes)}),
                   /*root=*/0, cpu);
    return absl::OkStatus();
  };
}

BroadcastBytes broadcast_through(TcpStore& store, const ProcessGroup& group) {
  const std::string key = store.unique_key(absl::StrCat("bcast/", group.name, "/", group.id));
  const bool root = group.index == 0;
  const std::string what = group.describe();
  return [&store, key, root, what](void* data, size_t bytes) -> absl::Status {
    if (root) return store.set(key, std::string(static_cast<const char*>(data), bytes));
    absl::StatusOr<std::string> v = store.get(key);
    if (!v.ok()) {
      return absl::Status(
          v.status().code(),
          absl::StrCat("the bootstrap of the ", what, " from its rank 0: ", v.status().message()));
    }
    if (v->size() != bytes) {
      return absl::InternalError(absl::StrFormat(
          "the bootstrap of the %s: group rank 0 published %d bytes under \"%s\", expected %d",
          what, v->size(), key, bytes));
    }
    std::memcpy(data, v->data(), bytes);
    return absl::OkStatus();
  };
}

}  // namespace anvil::parallel
