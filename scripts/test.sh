#!/usr/bin/env bash
# Builds what the tests need and runs the whole suite except the GPU tests: `ctest -LE gpu`,
# then each fuzz harness for a while (scripts/fuzz.sh), then the unit tests under ASan + UBSan and
# the threaded runtime's under TSan (scripts/sanitize.sh). .ci/run calls this (after
# scripts/setup.sh), so a fresh machine proves the set-up.
#
#   scripts/test.sh [--repeat N] [--busy-cores K] [--slowdown F] [--fuzz-seconds S]
#                   [--sanitizers all|asan|tsan|none] [CTEST_ARGS...]
#
#   --repeat N        run the suite N times, stopping at the first run that fails
#   --busy-cores K    keep K cores busy (stress-ng --cpu K) while the suite runs
#   --slowdown F      run engines and trainers F times slower (TROUPE_TEST_SLOWDOWN, docs/testing.md)
#   --fuzz-seconds S  run each fuzz harness S seconds after the suite (default 30; 0: none, and
#                     none when CTEST_ARGS pick some tests)
#   --sanitizers M    which sanitizer builds run after that (default all; none when CTEST_ARGS
#                     pick some tests)
#   CTEST_ARGS        passed to ctest, e.g. -R ServeTest to run some tests only
#
# Each run prints its number, verdict and duration; docs/testing.md records such runs.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/test.sh [--repeat N] [--busy-cores K] [--slowdown F] [--fuzz-seconds S]" \
    "[--sanitizers all|asan|tsan|none] [CTEST_ARGS...]" >&2
  exit 2
}
number() { [[ "$2" =~ ^[0-9]+$ ]] || { echo "scripts/test.sh: $1 needs a whole number, not '$2'" >&2; usage; }; }

repeat=1
busy=0
fuzz_seconds=30
sanitizers=all
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) [ $# -ge 2 ] || usage; number "$1" "$2"; repeat=$2; shift 2 ;;
    --busy-cores) [ $# -ge 2 ] || usage; number "$1" "$2"; busy=$2; shift 2 ;;
    --slowdown) [ $# -ge 2 ] || usage; export TROUPE_TEST_SLOWDOWN=$2; shift 2 ;;
    --fuzz-seconds) [ $# -ge 2 ] || usage; number "$1" "$2"; fuzz_seconds=$2; shift 2 ;;
    --sanitizers)
      [ $# -ge 2 ] || usage
      case "$2" in all|asan|tsan|none) sanitizers=$2 ;; *) echo "scripts/test.sh: --sanitizers takes all, asan, tsan or none, not '$2'" >&2; usage ;; esac
      shift 2 ;;
    *) ctest_args+=("$1"); shift ;;
  esac
done

cmake -S . -B build
cmake --build build -j "$(nproc)" --target troupe_tests

stress_pid=""
stop_stress() { if [ -n "$stress_pid" ]; then kill "$stress_pid" 2>/dev/null || true; wait "$stress_pid" 2>/dev/null || true; fi; }
trap stop_stress EXIT
if [ "$busy" -gt 0 ]; then
  command -v stress-ng >/dev/null || { echo "scripts/test.sh: stress-ng is missing; run scripts/setup.sh" >&2; exit 1; }
  stress-ng --cpu "$busy" --quiet &
  stress_pid=$!
  echo "test.sh: $busy core(s) kept busy by stress-ng (pid $stress_pid)"
fi

for ((run = 1; run <= repeat; run++)); do
  started=$(date +%s)
  if ctest --test-dir build -LE gpu --output-on-failure -j "$(nproc)" "${ctest_args[@]}"; then
    echo "test.sh: run $run/$repeat passed in $(($(date +%s) - started)) s"
  else
    echo "test.sh: run $run/$repeat FAILED after $(($(date +%s) - started)) s" >&2
    exit 1
  fi
done

if [ "$fuzz_seconds" -gt 0 ] && [ ${#ctest_args[@]} -eq 0 ]; then
  started=$(date +%s)
  scripts/fuzz.sh "$fuzz_seconds"
  echo "test.sh: fuzzing passed in $(($(date +%s) - started)) s"
fi

if [ "$sanitizers" != none ] && [ ${#ctest_args[@]} -eq 0 ]; then
  started=$(date +%s)
  scripts/sanitize.sh "$sanitizers"
  echo "test.sh: sanitizers passed in $(($(date +%s) - started)) s"
fi
