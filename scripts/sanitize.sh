#!/usr/bin/env bash
# The unit tests under sanitizers (docs/testing.md#sanitizers), each in its own build directory
# with CUDA off:
#
#   scripts/sanitize.sh asan   # ASan + UBSan (build-asan): every test binary but the integration
#                              # and gpu ones
#   scripts/sanitize.sh tsan   # TSan (build-tsan): the threaded runtime parts, the scheduler's
#                              # I/O polling, the peer inbox, the collective queue, the async
#                              # checkpoint writer; CAF's internals suppressed (tests/tsan.supp)
#   scripts/sanitize.sh all    # both
#
# Any report fails the test that made it, and the script.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
case "$mode" in asan|tsan|all) ;; *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;; esac

configure() {  # DIR SANITIZERS
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_CUDA=OFF -DTROUPE_BUILD_BENCH=OFF \
    -DTROUPE_SANITIZE="$2" >/dev/null
}

if [ "$mode" = asan ] || [ "$mode" = all ]; then
  started=$(date +%s)
  configure build-asan address,undefined
  cmake --build build-asan -j "$(nproc)" --target troupe_unit_tests
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -LE 'gpu|integration' --output-on-failure -j "$(nproc)"
  echo "sanitize.sh: asan passed in $(($(date +%s) - started)) s"
fi

if [ "$mode" = tsan ] || [ "$mode" = all ]; then
  started=$(date +%s)
  configure build-tsan thread
  cmake --build build-tsan -j "$(nproc)" --target runtime_test cluster_test comm_test \
    tensor_checkpoint_test
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" \
    -R '^(IoWorkStealing|PeerInboxTest|CollectiveQueue|AsyncWriter|JobEndFlush)\.'
  echo "sanitize.sh: tsan passed in $(($(date +%s) - started)) s"
fi
