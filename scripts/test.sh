#!/usr/bin/env bash
# The whole test suite (docs/testing.md says what each part runs and what it costs):
#   1. build-asan/ (clang 14, ASan + UBSan): every unit and end-to-end test, then every libFuzzer
#      target for ZIPG_FUZZ_SECONDS (15; from the environment) from its seeds, after replaying its
#      kept crash inputs.
#   2. build-tsan/ (clang 14, ThreadSanitizer): the unit tests of the concurrent code.
#
# Usage: scripts/test.sh                       both sanitizer builds (CI)
#        ZIPG_TEST_PLAIN=1 scripts/test.sh     first the optimized GCC build/ and all its tests
#        ZIPG_TEST_SANITIZE=0 scripts/test.sh  only the optimized build (faster local runs)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
took() { echo "test.sh: $1: $((SECONDS - start)) s since the start"; }

sanitize=${ZIPG_TEST_SANITIZE:-1}
if [ "${ZIPG_TEST_PLAIN:-0}" = 1 ] || [ "$sanitize" = 0 ]; then
  bash scripts/setup.sh
  took "optimized build"
  (cd build && ctest --output-on-failure -j2)
  took "tests in the optimized build"
fi
[ "$sanitize" = 0 ] && exit 0

bash scripts/setup.sh --asan
took "ASan + UBSan build"
# The ThreadSanitizer build runs beside the ASan tests at the lowest CPU priority (nice 19): it
# gets the CPU the tests leave idle (the cluster tests, one at a time, wait on the network, on
# each other and on timers much of the time) and little else, so the tests' deadlines see about
# the machine they would see alone (docs/testing.md, "Cost").
tsan_log=$(mktemp)
nice -n 19 bash scripts/setup.sh --tsan > "$tsan_log" 2>&1 &
tsan_build=$!
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -j2 -LE fuzz)
took "tests under ASan + UBSan"
(cd build-asan && ctest --output-on-failure -j2 -L fuzz)
cat build-asan/fuzz-out/*.summary
took "fuzz targets"

if ! wait "$tsan_build"; then
  tail -50 "$tsan_log"
  echo "test.sh: the ThreadSanitizer build failed"
  exit 1
fi
rm -f "$tsan_log"
took "ThreadSanitizer build (beside the tests above)"
(cd build-tsan && ctest --output-on-failure -j2 -L tsan)
took "tests under ThreadSanitizer"
