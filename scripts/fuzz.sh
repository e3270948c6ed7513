#!/usr/bin/env bash
# The libFuzzer targets (fuzz/, docs/testing.md), for runs longer than the suite's: builds
# build-asan/ (scripts/setup.sh --asan: clang 14, ASan + UBSan, libFuzzer coverage) and runs each
# target for SECONDS (default 30) with scripts/fuzz_run.sh, one after another. The corpora grow in
# build-asan/fuzz-out/corpus/<target>; a crash leaves its reproducer in
# build-asan/fuzz-out/crashes/<target>/ and the exit status is 1.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true

bash scripts/setup.sh --asan
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
  targets=($(sed -n 's/^zipg_add_fuzzer(\([a-z_]*\) .*/\1/p' fuzz/CMakeLists.txt) \
           thrift_graph thrift_shard thrift_logstore)
fi

failed=0
for t in "${targets[@]}"; do
  scripts/fuzz_run.sh build-asan/fuzz/"$t"_fuzz fuzz "$t" "$seconds" build-asan/fuzz-out || failed=1
done
exit $failed
