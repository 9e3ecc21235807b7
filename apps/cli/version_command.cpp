#include <cstdio>

#include "absl/strings/str_cat.h"
#include "apps/cli/commands.hpp"
#include "caf/config.hpp"
#include "kernels/matmul.hpp"
#include "nlohmann/json.hpp"
#include "runtime/comm/nccl_communicator.hpp"
#include "runtime/plugin/plugin_abi.h"
#include "runtime/tensor/cuda_device.hpp"

#ifndef TROUPE_VERSION
#define TROUPE_VERSION "unknown"
#endif

namespace troupe::cli {

int version_command(bool json) {
  nlohmann::json out = {
      {"troupe", TROUPE_VERSION},
      {"caf", absl::StrCat(CAF_MAJOR_VERSION, ".", CAF_MINOR_VERSION, ".", CAF_PATCH_VERSION)},
      {"plugin_abi", TROUPE_PLUGIN_ABI_VERSION},
      {"cuda_compiled", tensor::cuda_compiled()},
      {"blas", kernels::cpu::blas_config()}};
  const absl::StatusOr<std::string> nccl = comm::nccl_version();
  out["nccl"] = nccl.ok() ? *nccl : std::string("none");
  auto devices = tensor::cuda_devices();
  if (devices.ok()) {
    out["cuda_devices"] = nlohmann::json::array();
    for (const auto& d : *devices) {
      out["cuda_devices"].push_back(
          {{"index", d.index},
           {"name", d.name},
           {"memory_bytes", d.memory_bytes},
           {"compute_capability", absl::StrCat(d.compute_major, ".", d.compute_minor)}});
    }
  } else {
    out["cuda_devices"] = nlohmann::json::array();
    out["cuda_unavailable"] = std::string(devices.status().message());
  }
  if (json) {
    std::printf("%s\n", out.dump().c_str());
    return exit_ok;
  }
  std::printf("troupe %s (CAF %s, plugin ABI %u)\n", TROUPE_VERSION,
              out["caf"].get<std::string>().c_str(), TROUPE_PLUGIN_ABI_VERSION);
  std::printf("BLAS: %s\n", kernels::cpu::blas_config());
  std::printf("NCCL: %s\n", out["nccl"].get<std::string>().c_str());
  std::printf("CUDA: %s\n", tensor::cuda_compiled() ? "compiled" : "not compiled");
  if (devices.ok()) {
    for (const auto& d : *devices) {
      std::printf("  cuda:%d %s, %.1f GiB, sm_%d%d\n", d.index, d.name.c_str(),
                  d.memory_bytes / double(1 << 30), d.compute_major, d.compute_minor);
    }
    if (devices->empty()) std::printf("  no CUDA devices\n");
  } else {
    std::printf("  no GPU available: %s\n", std::string(devices.status().message()).c_str());
  }
  return exit_ok;
}

}  // namespace troupe::cli
