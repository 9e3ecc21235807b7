#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz: clang, ASan and UBSan) in build-fuzz and runs each
# for SECONDS (default 30), one per core at a time, from its corpus, tests/fuzz/corpus/<harness>/
# (left as it is: what a run discovers goes to build-fuzz/corpus/<harness>/). A crash fails the run and leaves its input
# in build-fuzz/crashes/<harness>/: fix the bug, then commit the input into
# tests/fuzz/corpus/<harness>/, where fuzz_replay_test replays it in the suite
# (docs/testing.md#fuzzing).
#
#   scripts/fuzz.sh [SECONDS [HARNESS...]]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS [HARNESS...]]" >&2; exit 2; }
shift || true
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
  harnesses=(peer_frame head_request config safetensors manifest openai_request)
fi
command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ is missing; run scripts/setup.sh" >&2; exit 1; }

CC=clang CXX=clang++ cmake -S . -B build-fuzz -DTROUPE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$(nproc)"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for h in "${harnesses[@]}"; do
  [ -x "build-fuzz/tests/fuzz/fuzz_$h" ] || { echo "scripts/fuzz.sh: no harness '$h'" >&2; exit 2; }
done

fuzz() {  # HARNESS: runs one harness; a crash leaves build-fuzz/HARNESS.crashed
  local h=$1
  mkdir -p "build-fuzz/corpus/$h" "build-fuzz/crashes/$h"
  rm -f "build-fuzz/$h.crashed"
  if "build-fuzz/tests/fuzz/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$h/" "build-fuzz/corpus/$h" \
      "tests/fuzz/corpus/$h" > "build-fuzz/$h.log" 2>&1; then
    echo "fuzz.sh: $h: $(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "build-fuzz/$h.log" | grep -Eo '[0-9]+$') inputs, no crash"
  else
    touch "build-fuzz/$h.crashed"
    echo "fuzz.sh: $h CRASHED; input in build-fuzz/crashes/$h/, log build-fuzz/$h.log:" >&2
    grep -E "ERROR|runtime error|SUMMARY|==[0-9]+==" "build-fuzz/$h.log" | head -20 >&2 || true
  fi
}

# One harness per core at a time: each still gets SECONDS of a whole core.
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  echo "fuzz.sh: $h for ${seconds} s"
  fuzz "$h" &
done
wait
failed=()
for h in "${harnesses[@]}"; do
  if [ -e "build-fuzz/$h.crashed" ]; then failed+=("$h"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in ${failed[*]}" >&2
  exit 1
fi
