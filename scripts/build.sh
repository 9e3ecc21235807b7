#!/usr/bin/env bash
# Configures and builds everything (Release, ccache when present) into build/; the troupe binary
# ends up at build/troupe. Extra arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build "$@"
cmake --build build -j "$(nproc)"
