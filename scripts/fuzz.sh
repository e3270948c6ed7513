#!/usr/bin/env bash
# The libFuzzer targets (fuzz/, docs/testing.md): installs clang 14 and its fuzzer runtime, builds
# build-fuzz/ (clang, ASan + UBSan, coverage for libFuzzer) and runs every target for SECONDS
# each (default 30) from a copy of its checked-in seeds (fuzz/seeds/<target>). Exit status 1 if a
# target crashed; its reproducer is left in build-fuzz/crashes/<target>/.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true

bash scripts/setup.sh --no-build
if ! command -v clang++-14 >/dev/null || [ ! -e /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang-14 libclang-rt-14-dev
fi
CXX=clang++-14 cmake -G Ninja -S . -B build-fuzz -DZIPG_SANITIZE=ON -DZIPG_FUZZ=ON >/dev/null
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
  targets=($(sed -n 's/^zipg_add_fuzzer(\([a-z_]*\)_fuzz .*/\1/p' fuzz/CMakeLists.txt))
fi
ninja -C build-fuzz -j2 "${targets[@]/%/_fuzz}"

failed=0
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  crashes=build-fuzz/crashes/$t
  mkdir -p "$corpus" "$crashes"
  cp -n fuzz/seeds/"$t"/* "$corpus"/ 2>/dev/null || true
  log=build-fuzz/$t.log
  if build-fuzz/fuzz/"$t"_fuzz -max_total_time="$seconds" -timeout=10 -max_len=4096 \
       -artifact_prefix="$crashes"/ "$corpus" >"$log" 2>&1; then
    echo "fuzz $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1)"
  else
    echo "fuzz $t: FAILED (log $log, reproducer in $crashes/)"
    tail -20 "$log"
    failed=1
  fi
done
exit $failed
