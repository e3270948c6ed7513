#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages, then configures and builds.
# Idempotent: packages already present are not reinstalled, and apt is quiet when nothing is missing.
#
# Usage: scripts/setup.sh [--no-build] [--asan | --tsan]
#   --no-build  install packages only (with --asan or --tsan: clang too)
#   --asan      build-asan/ instead of build/: clang 14, ASan + UBSan, the libFuzzer targets
#   --tsan      build-tsan/: clang 14, ThreadSanitizer, only the tests labelled "tsan"
#               (docs/testing.md)
set -euo pipefail

cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkgconf git
  thrift-compiler libthrift-dev libboost-dev libevent-dev
  libdivsufsort-dev libsdsl-dev libxxhash-dev libzstd-dev
  etcd-server etcd-client
  libcurl4-openssl-dev curl nlohmann-json3-dev openssl iproute2 iptables libnetfilter-queue-dev
  prometheus-cpp-dev libcpp-httplib-dev prometheus chromium chromium-driver
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-thrift python3-venv python3-pip python3-setuptools python3-wheel
  clang-format
)

build=1
build_dir=build
cmake_args=()
targets=()
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --asan) build_dir=build-asan; cmake_args+=(-DZIPG_SANITIZE=ON -DZIPG_FUZZ=ON) ;;
    --tsan) build_dir=build-tsan; cmake_args+=(-DZIPG_TSAN=ON); targets=(tsan_tests) ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
if [ "$build_dir" != build ]; then
  # The sanitizer builds use clang 14: libFuzzer needs it, and one compiler serves both.
  packages+=(clang-14 libclang-rt-14-dev)
  cmake_args+=(-DCMAKE_CXX_COMPILER=clang++-14)
fi

# Go builds the linearizability checker of the Jepsen tests (tests/jepsen/checker, porcupine from
# the Go module proxy); Debian 12's golang (1.19) is enough. A Go already on PATH is used as it is.
command -v go >/dev/null 2>&1 || packages+=(golang-go)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's prometheus package may start its own server on :9090; the tests start theirs.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl stop prometheus || true
fi

# PyPI packages of the tests and scripts, in .venv (sees Debian's python3-thrift): Selenium for
# the browser test (tests/explorer_test.py), matplotlib for scripts/plot.py.
if ! .venv/bin/python -c 'import selenium, matplotlib' >/dev/null 2>&1; then
  echo "setup: installing selenium and matplotlib into .venv"
  /usr/bin/python3 -m venv --system-site-packages .venv
  .venv/bin/pip install -q selenium matplotlib
fi

if [ "$build" -eq 1 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${cmake_args[@]}" >/dev/null
  cmake --build "$build_dir" -j2 ${targets[@]:+--target "${targets[@]}"}
fi
