#!/usr/bin/env bash
# Builds the Debian package troupe_<version>_amd64.deb (cmake/TroupePackage.cmake) and prints its
# path on the last line of stdout.
#
#   scripts/deb.sh [--build-dir DIR] [--lint]
#
#   --build-dir DIR  the tree to package (default build-deb): a CPU-only build (-DTROUPE_CUDA=OFF)
#                    installed under /usr, since the package's dependencies must all be Debian
#                    packages and CUDA's libraries (/usr/local/cuda) are not; with ccache it
#                    mostly reuses the objects of build/
#   --lint           also run lintian on the package and fail on its errors
#
# Install it with `apt install ./troupe_<version>_amd64.deb`, or unpack it anywhere with
# `dpkg -x`: the binary finds its libraries, plugins and configs relative to itself.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/deb.sh [--build-dir DIR] [--lint]" >&2; exit 2; }
build_dir=build-deb
lint=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage; build_dir=$2; shift 2 ;;
    --lint) lint=1; shift ;;
    *) usage ;;
  esac
done
for tool in dpkg-shlibdeps fakeroot; do
  command -v "$tool" >/dev/null || { echo "scripts/deb.sh: $tool is missing; run scripts/setup.sh" >&2; exit 1; }
done

cmake -S . -B "$build_dir" -DTROUPE_CUDA=OFF -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr >&2
cmake --build "$build_dir" -j "$(nproc)" --target troupe troupe_plugins >&2
rm -f "$build_dir"/troupe_*.deb
(cd "$build_dir" && cpack -G DEB >&2)
deb=$(ls "$build_dir"/troupe_*_amd64.deb)
if [ "$lint" = 1 ]; then
  command -v lintian >/dev/null || { echo "scripts/deb.sh: lintian is missing; run scripts/setup.sh" >&2; exit 1; }
  lintian --fail-on error "$deb" >&2
fi
echo "$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")"
