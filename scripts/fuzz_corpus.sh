#!/usr/bin/env bash
# Regenerates the checked-in seed corpora, fuzz/seeds/<target>/, from valid inputs: each target
# writes its own seeds, made by the real encoders and writers, when run with
# ZIPG_FUZZ_WRITE_SEEDS=DIR (fuzz/fuzz_common.h). Needs the targets built (scripts/setup.sh --asan).
#
# Usage: scripts/fuzz_corpus.sh [BUILD_DIR]   (default build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
for bin in "$build"/fuzz/*_fuzz; do
  t=$(basename "$bin" _fuzz)
  rm -rf fuzz/seeds/"$t"
  ZIPG_FUZZ_WRITE_SEEDS=fuzz/seeds/"$t" "$bin" 2>&1 | tail -1
done
