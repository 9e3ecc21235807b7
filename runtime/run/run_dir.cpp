#include "runtime/run/run_dir.hpp"

#include <ctime>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace troupe::run {
namespace fs = std::filesystem;

absl::StatusOr<run_dir> run_dir::create(const std::optional<std::string>& requested,
                                        absl::string_view app) {
  std::error_code ec;
  fs::path path;
  if (requested) {
    path = *requested;
    if (fs::exists(path, ec) && !fs::is_empty(path, ec)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "run directory ", path.string(), " is not empty; choose a new --run-dir or remove it"));
    }
  } else {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
    const fs::path base = fs::path("runs") / absl::StrCat(app, "-", stamp);
    fs::create_directories(base.parent_path(), ec);
    // Claimed by creating it: two launches in the same second get a directory each.
    path = base;
    for (int n = 2; !ec && !fs::create_directory(path, ec); ++n)
      path = absl::StrCat(base.string(), "-", n);
  }
  if (!ec) fs::create_directories(path, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create run directory ", path.string(), ": ", ec.message()));
  }
  return run_dir(path);
}

absl::Status run_dir::write_file(absl::string_view name, absl::string_view contents) const {
  const fs::path target = file(name);
  std::ofstream out(target, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", target.string()));
  return absl::OkStatus();
}

}  // namespace troupe::run
