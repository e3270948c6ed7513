#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every registered test (unit tests and
# end-to-end CLI tests) in the normal build, then again in an AddressSanitizer + UBSan build.
#
# Usage: scripts/test.sh            both builds
#        ZIPG_TEST_SANITIZE=0 scripts/test.sh   skip the sanitizer build (faster local runs)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
(cd build && ctest --output-on-failure -j2)

if [ "${ZIPG_TEST_SANITIZE:-1}" != "0" ]; then
  bash scripts/setup.sh --asan
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j2)
fi
