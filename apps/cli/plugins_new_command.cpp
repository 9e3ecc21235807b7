#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/cli/commands.hpp"
#include "apps/cli/install_layout.hpp"
#include "apps/cli/plugin_project.hpp"

namespace troupe::cli {

int plugins_new_command(const plugins_new_args& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::absolute(fs::path(args.dir) / args.name, ec).lexically_normal();
  if (ec) {
    std::fprintf(stderr, "troupe plugins new: --dir %s: %s\n", args.dir.c_str(),
                 ec.message().c_str());
    return exit_usage_error;
  }
  const auto prefix = installed_prefix();
  auto files = plugin_project_files({.name = args.name,
                                     .kind = args.kind,
                                     .dir = dir.string(),
                                     .prefix = prefix ? prefix->string() : "PREFIX"});
  if (!files.ok()) {
    std::fprintf(stderr, "troupe plugins new: %s\n", std::string(files.status().message()).c_str());
    return exit_usage_error;
  }
  if (fs::exists(dir)) {
    std::fprintf(stderr,
                 "troupe plugins new: %s exists already; choose another NAME, or another "
                 "directory with --dir\n",
                 dir.c_str());
    return exit_usage_error;
  }
  for (const auto& file : *files) {
    const fs::path path = dir / file.path;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path);
    out << file.text;
    out.close();
    if (ec || !out) {
      std::fprintf(stderr, "troupe plugins new: cannot write %s%s%s\n", path.c_str(),
                   ec ? ": " : "", ec ? ec.message().c_str() : "");
      return exit_runtime_failure;
    }
  }
  std::printf("created %s, a %s plugin project:\n", dir.c_str(), args.kind.c_str());
  for (const auto& file : *files)
    std::printf("  %s\n", file.path.c_str());
  std::printf(
      "build and test it:\n  cd %s\n  cmake -S . -B build -DCMAKE_PREFIX_PATH=%s\n"
      "  cmake --build build && ctest --test-dir build\n",
      dir.c_str(), prefix ? prefix->c_str() : "PREFIX");
  if (!prefix) {
    std::printf(
        "(this troupe runs from a build tree: install it first with `cmake --install "
        "build --prefix PREFIX`)\n");
  }
  return exit_ok;
}

}  // namespace troupe::cli
