#!/usr/bin/env bash
# The GPU checks, in one prepared script for a session that has the device machine.
#
#   scripts/gpu_check.sh bundle    here: build, then pack the GPU test and benchmark binaries
#                                  with their libraries into .device-bundle/ (git-ignored)
#   scripts/gpu_check.sh run       there (device tool, carry [".device-bundle"]): run the `gpu`
#                                  tests and the GPU benchmarks, writing JSON results to $OUT
#
# Record what comes back in docs/benchmarks.md with the date and the device.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=.device-bundle

case "${1:-}" in
  bundle)
    scripts/build.sh
    cmake --build build -j "$(nproc)" --target gpu_test
    rm -rf "$bundle"
    ../shared/tools/bundle-binaries.sh "$bundle" build/troupe build/tests/gpu_test
    ;;
  run)
    out=${OUT:?run on the device machine, where OUT is set}
    export LD_LIBRARY_PATH="$PWD/$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/device.csv"
    "$bundle/bin/troupe" version --json | tee "$out/version.json"
    status=0
    "$bundle/bin/gpu_test" --gtest_output="json:$out/gpu_test.json" || status=$?
    exit $status
    ;;
  *)
    echo "usage: $0 bundle|run" >&2
    exit 2
    ;;
esac
