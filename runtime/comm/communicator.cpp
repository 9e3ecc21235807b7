#include "runtime/comm/communicator.hpp"

#include <algorithm>

namespace troupe::comm {

absl::Status communicator::broadcast_in_pieces(const tensor::tensor& data, int root,
                                               int64_t piece_bytes, const piece_fn& on_piece) {
  if (piece_bytes <= 0) {
    return absl::InvalidArgumentError("broadcast in pieces: a piece must hold at least 1 byte");
  }
  if (absl::Status s = broadcast(data, root); !s.ok()) return s;
  const int64_t bytes = data.nbytes();
  for (int64_t offset = 0; offset < bytes; offset += piece_bytes)
    on_piece(offset, std::min(piece_bytes, bytes - offset));
  return absl::OkStatus();
}

}  // namespace troupe::comm
