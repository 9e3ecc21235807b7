#!/usr/bin/env bash
# Configures (Release, ccache when present) and builds the troupe binary (build/troupe) and the
# plugins that ship with it (build/plugins). Extra arguments go to CMake's configure step.
# `cmake --build build` builds everything else too (tests, benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build "$@"
cmake --build build -j "$(nproc)" --target troupe troupe_plugins
