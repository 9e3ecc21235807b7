#pragma once

#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace troupe {

/// An exclusive lock (flock) on the existing file or directory `path` for as long as it lives:
/// processes that start together take turns on work whose result the first one caches.
class file_lock {
 public:
  explicit file_lock(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~file_lock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;
  /// False when `path` could not be opened (then nothing is locked).
  [[nodiscard]] bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace troupe
