#!/usr/bin/env bash
# The GPU checks, in one prepared script for a session that has the device machine.
#
#   scripts/gpu_check.sh bundle    here: build, then pack the GPU test and benchmark binaries
#                                  with their libraries into .device-bundle/bundle.tar.gz
#                                  (git-ignored; gzipped to fit the device tool's 64 MiB carry)
#   scripts/gpu_check.sh run       there (device tool, carry [".device-bundle"]): run the `gpu`
#                                  tests at once (cuda_kernels_test: every CUDA kernel against
#                                  its CPU reference, RMSNorm/RoPE/SwiGLU and grouped-query
#                                  attention (training and paged decode) included;
#                                  cuda_models_test: the CUDA decoder against the CPU one for
#                                  GPT-2 and the Llama family, a chunk's logit rows after each
#                                  token included (speculative decoding's check), hidden
#                                  states beside logits (embeddings) and int8/int4 weights
#                                  against the quantized CPU decoder, and the CUDA
#                                  training model's loss and gradients against the CPU stage's
#                                  for GPT-2, a Llama and a Qwen 3; nccl_test: an aborted group
#                                  rebuilt at the next epoch; three rank processes sharing the GPU, the last killed or
#                                  stopped, the survivors aborting and regrouping; with 2+ GPUs
#                                  the same in threads;
#                                  cuda_actors_test: with 2+ GPUs the pipeline's stage exchange
#                                  and the tensor-parallel sums over NCCL),
#                                  the PyTorch reference and gpu_bench (GEMM at 8192^3
#                                  against cuBLAS, HBM bandwidth, GPT-2 124M training tokens/s),
#                                  and serve_bench with the inference workers on CUDA, writing
#                                  to $OUT: device.txt, log.txt (every test's output),
#                                  gtest.jsonl (the verdicts), bench.jsonl (the figures)
#   scripts/gpu_check.sh profile   there: per-kernel GPU time of a GPT-2 124M training step
#                                  (Nsight Compute), to $OUT/profile.txt and ncu.csv
#
# Record what comes back in docs/benchmarks.md with the date and the device.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=.device-bundle
gpu_tests=(gpu_test cuda_kernels_test nccl_test cuda_models_test cuda_actors_test)

# There: unpacks the bundle and finds CUDA, cuBLAS and NCCL on the device machine (the bundle
# leaves them out): the toolkit's folders first, else wherever its Python packages keep them.
unpack() {
  out=${OUT:?run on the device machine, where OUT is set}
  tar -C "$bundle" -xzf "$bundle/bundle.tar.gz"
  local libs="$PWD/$bundle/lib" lib found
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    found=$( { ls /usr/local/cuda/lib64/$lib /usr/local/cuda/lib/$lib 2>/dev/null
               find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null; } | head -1 || true)
    echo "$lib: ${found:-NOT FOUND}" | tee -a "$out/device.txt"
    [ -n "$found" ] && libs="$libs:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
}

case "${1:-}" in
  bundle)
    scripts/build.sh
    cmake --build build -j "$(nproc)" --target "${gpu_tests[@]}" nccl_rank gpu_bench serve_bench
    rm -rf "$bundle"
    ../shared/tools/bundle-binaries.sh "$bundle/tree" build/troupe build/bench/gpu_bench \
      build/bench/serve_bench build/tests/nccl_rank "${gpu_tests[@]/#/build/tests/}"
    tar -C "$bundle/tree" -czf "$bundle/bundle.tar.gz" bin lib
    rm -rf "$bundle/tree"
    du -sh "$bundle/bundle.tar.gz"
    ;;
  run)
    unpack
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee -a "$out/device.txt" || true
    "$bundle/bin/troupe" version --json | tee -a "$out/device.txt"
    status=0
    # The gpu tests at once (correctness only: they share the GPU), each bounded; full logs in
    # log.txt, every test's verdict in gtest.jsonl.
    mkdir -p /tmp/gtest
    for t in "${gpu_tests[@]}"; do
      timeout 200 "$bundle/bin/$t" --gtest_output="json:/tmp/gtest/$t.json" >"/tmp/gtest/$t.log" 2>&1 &
    done
    wait || true
    for t in "${gpu_tests[@]}"; do
      { echo "=== $t"; cat "/tmp/gtest/$t.log"; } >>"$out/log.txt"
      { grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|rror' "/tmp/gtest/$t.log" || true; } \
        | sed "s|^|$t: |" | head -40
      if [ -f "/tmp/gtest/$t.json" ]; then
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps(r));
sys.exit(1 if r["failures"] or r["errors"] else 0)' "/tmp/gtest/$t.json" >>"$out/gtest.jsonl" \
          || status=1
      else
        echo "$t: no verdict (crashed or timed out)"; status=1
      fi
    done
    # The training row's baseline: the same model in PyTorch on this GPU.
    torch_rate=$(timeout 100 python3 bench/ref_gpt_cuda_torch.py | tee -a "$out/bench.jsonl" \
                 | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])' || echo 0)
    timeout 120 "$bundle/bin/gpu_bench" --torch-tokens-per-s "$torch_rate" 2>&1 \
      | tee -a "$out/bench.jsonl" || status=1
    # Continuous against static batching with the model on the GPU.
    timeout 100 "$bundle/bin/serve_bench" --device cuda --troupe "$bundle/bin/troupe" \
      --config configs/serve_tiny.yaml 2>&1 | tee -a "$out/bench.jsonl" \
      || { status=1; tail -n 5 /tmp/serve_bench.*/events.jsonl 2>/dev/null || true; }
    exit $status
    ;;
  profile)
    # Where a training step's GPU time goes: every kernel of gpu_bench's training row (a warm-up
    # step and five timed ones) under Nsight Compute, timed once each, summed per kernel name.
    unpack
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1 || true)
    timeout 240 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
      --print-units base "$bundle/bin/gpu_bench" --only train --repeats 1 >"$out/ncu.csv" || true
    python3 scripts/kernel_time_summary.py "$out/ncu.csv" 6 | tee "$out/profile.txt"
    ;;
  *)
    echo "usage: $0 bundle|run|profile" >&2
    exit 2
    ;;
esac
