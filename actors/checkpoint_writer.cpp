#include "actors/checkpoint_writer.hpp"

#include <chrono>

#include "runtime/base/status.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"

namespace troupe::actors {

absl::StatusOr<actor::checkpoint_shard> write_snapshot(const actor::checkpoint_snapshot& snapshot) {
  const auto start = std::chrono::steady_clock::now();
  const checkpoint::checkpoint_store store(snapshot.root);
  actor::checkpoint_shard shard = snapshot.shard;
  if (snapshot.files != nullptr) {
    for (const auto& [name, contents] : *snapshot.files) {
      TROUPE_ASSIGN_OR_RETURN(checkpoint::file_record record,
                              store.stage(shard.step, name, contents));
      shard.files.push_back(std::move(record));
    }
  }
  shard.write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return shard;
}

}  // namespace troupe::actors
