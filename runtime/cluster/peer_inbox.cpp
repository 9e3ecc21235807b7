#include "runtime/cluster/peer_inbox.hpp"

#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/cluster/zmq_util.hpp"

namespace troupe::cluster {
namespace {

// Messages handled per poll: the holder then runs the work they made before it reads on.
constexpr int max_messages_per_poll = 1000;

}  // namespace

peer_inbox::peer_inbox(zmq::socket_t router, frame_handler handler)
    : router_(std::move(router)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      handler_(std::move(handler)) {}

peer_inbox::~peer_inbox() {
  close();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool peer_inbox::poll(caf::execution_unit* here, std::chrono::milliseconds timeout) {
  if (held_.exchange(true, std::memory_order_acquire)) {
    refused_.store(true, std::memory_order_release);
    return false;
  }
  if (closed_) {
    held_.store(false, std::memory_order_release);
    return false;
  }
  // Frames already queued are handled without a system call; only an empty inbox waits.
  if (drain(here) == 0) {
    zmq::pollitem_t items[] = {poll_item(), {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, timeout);
    } catch (const zmq::error_t&) {
      // EINTR: the caller polls again.
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof count);
    }
    (void)drain(here);
  }
  held_.store(false, std::memory_order_release);
  return true;
}

int peer_inbox::drain(caf::execution_unit* here) {
  int n = 0;
  for (; n < max_messages_per_poll; ++n) {
    auto frames = try_recv(router_);
    if (!frames.ok() || frames->empty()) break;
    handler_(*frames, here);
  }
  return n;
}

void peer_inbox::wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void peer_inbox::close() {
  while (held_.exchange(true, std::memory_order_acquire)) {
    wake();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!closed_) {
    closed_ = true;
    router_.close();
  }
  held_.store(false, std::memory_order_release);
}

}  // namespace troupe::cluster
