#!/usr/bin/env bash
# The GPU checks, in one prepared script for a session that has the device machine.
#
#   scripts/gpu_check.sh bundle    here: build, then pack the GPU test and benchmark binaries
#                                  with their libraries into .device-bundle/bundle.tar.gz
#                                  (git-ignored; gzipped to fit the device tool's 64 MiB carry)
#   scripts/gpu_check.sh run       there (device tool, carry [".device-bundle"]): run the `gpu`
#                                  tests (nccl_test: an aborted group rebuilt at the next epoch,
#                                  and with 2+ GPUs the survivors of a lost rank regrouping;
#                                  cuda_actors_test: with 2+ GPUs the pipeline's stage exchange
#                                  and the tensor-parallel sums over NCCL),
#                                  the PyTorch reference and gpu_bench (GEMM at 8192^3
#                                  against cuBLAS, HBM bandwidth, GPT-2 124M training tokens/s),
#                                  and serve_bench with the inference workers on CUDA, writing
#                                  JSON results to $OUT
#
# Record what comes back in docs/benchmarks.md with the date and the device.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=.device-bundle
gpu_tests=(gpu_test cuda_kernels_test nccl_test cuda_models_test cuda_actors_test)

case "${1:-}" in
  bundle)
    scripts/build.sh
    cmake --build build -j "$(nproc)" --target "${gpu_tests[@]}" gpu_bench serve_bench
    rm -rf "$bundle"
    ../shared/tools/bundle-binaries.sh "$bundle/tree" build/troupe build/bench/gpu_bench \
      build/bench/serve_bench "${gpu_tests[@]/#/build/tests/}"
    tar -C "$bundle/tree" -czf "$bundle/bundle.tar.gz" bin lib
    rm -rf "$bundle/tree"
    du -sh "$bundle/bundle.tar.gz"
    ;;
  run)
    out=${OUT:?run on the device machine, where OUT is set}
    tar -C "$bundle" -xzf "$bundle/bundle.tar.gz"
    export LD_LIBRARY_PATH="$PWD/$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/device.csv"
    "$bundle/bin/troupe" version --json | tee "$out/version.json"
    status=0
    for t in "${gpu_tests[@]}"; do
      timeout 300 "$bundle/bin/$t" --gtest_output="json:$out/$t.json" 2>&1 | tail -20 || status=1
    done
    # The training row's baseline: the same model in PyTorch on this GPU.
    torch_rate=$(timeout 300 python3 bench/ref_gpt_cuda_torch.py | tee "$out/torch_reference.json" \
                 | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])' || echo 0)
    timeout 300 "$bundle/bin/gpu_bench" --torch-tokens-per-s "$torch_rate" \
      | tee "$out/gpu_bench.jsonl" || status=1
    # Continuous against static batching with the model on the GPU.
    timeout 300 "$bundle/bin/serve_bench" --device cuda --troupe "$bundle/bin/troupe" \
      --config configs/serve_tiny.yaml | tee "$out/serve_bench.jsonl" || status=1
    exit $status
    ;;
  *)
    echo "usage: $0 bundle|run" >&2
    exit 2
    ;;
esac
