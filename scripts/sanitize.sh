#!/usr/bin/env bash
# Unit tests under sanitizers (docs/testing.md#sanitizers), each build in its own directory with
# CUDA off:
#
#   scripts/sanitize.sh asan   # ASan + UBSan (build-asan): every unit test binary (the runtime,
#                              # plugins, actors, app drivers, tasks, kernels, the GPT, the
#                              # fuzz corpora); CAF's internals suppressed (tests/ubsan.supp)
#   scripts/sanitize.sh tsan   # TSan (build-tsan): the threaded parts without CAF actors: the
#                              # peer inbox, the collective queue, the async checkpoint writer,
#                              # the kernels' thread pool (the scheduler's tests need a
#                              # TSan-built CAF: see
#                              # docs/testing.md#sanitizers)
#   scripts/sanitize.sh all    # both
#
# Each test binary runs whole, in one process; any report fails it, and the script.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
case "$mode" in asan|tsan|all) ;; *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;; esac

run() {  # NAME SANITIZERS FILTER BINARY...
  local name=$1 sanitizers=$2 filter=$3
  shift 3
  local dir=build-$name started
  started=$(date +%s)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_CUDA=OFF \
    -DTROUPE_BUILD_BENCH=OFF -DTROUPE_SANITIZE="$sanitizers" >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target "$@"
  echo "sanitize.sh: $name built in $(($(date +%s) - started)) s"
  for binary in "$@"; do
    echo "sanitize.sh: $name $binary"
    "$dir/tests/$binary" --gtest_brief=1 --gtest_filter="$filter"
  done
  echo "sanitize.sh: $name passed in $(($(date +%s) - started)) s"
}

if [ "$mode" = asan ] || [ "$mode" = all ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/ubsan.supp" \
    run asan address,undefined '*' runtime_test cluster_test comm_test tensor_checkpoint_test \
    kernels_test models_test plugin_test actor_test apps_test tasks_test fuzz_replay_test
fi
if [ "$mode" = tsan ] || [ "$mode" = all ]; then
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    run tsan thread 'PeerInboxTest.*:CollectiveQueue.*:AsyncWriter.*:ThreadPool.*' \
    cluster_test comm_test tensor_checkpoint_test kernels_test
fi
