#!/usr/bin/env bash
# Builds what the tests need and runs the whole suite except the GPU tests: `ctest -LE gpu`.
# .ci/run calls this (after scripts/setup.sh), so a fresh machine proves the set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build
cmake --build build -j "$(nproc)" --target troupe_tests
ctest --test-dir build -LE gpu --output-on-failure -j "$(nproc)"
