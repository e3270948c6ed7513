#!/usr/bin/env bash
# Runs one libFuzzer target (docs/testing.md, "Fuzz targets"): first every kept crash input in
# fuzz/regressions/<name>/ once, then fuzzing for SECONDS from its corpus in OUT/corpus/<name>
# (seeded from fuzz/seeds/<name>/). A crash leaves its reproducer in OUT/crashes/<name>/ and the
# exit status is non-zero. Prints the executions and the corpus size.
#
# Usage: scripts/fuzz_run.sh BINARY FUZZ_DIR NAME SECONDS OUT   (ZIPG_FUZZ_SECONDS overrides SECONDS)
set -euo pipefail
bin=$1 src=$2 name=$3 seconds=${ZIPG_FUZZ_SECONDS:-$4} out=$5
corpus=$out/corpus/$name
crashes=$out/crashes/$name
mkdir -p "$corpus" "$crashes"
cp -n "$src/seeds/$name"/* "$corpus"/ 2>/dev/null || true

shopt -s nullglob
kept=("$src/regressions/$name"/*)
if [ ${#kept[@]} -gt 0 ]; then
  "$bin" "${kept[@]}" >"$out/$name.regressions.log" 2>&1 || {
    cat "$out/$name.regressions.log"
    echo "fuzz $name: a kept crash input fails again"
    exit 1
  }
fi

log=$out/$name.log
if ! "$bin" -max_total_time="$seconds" -timeout=10 -max_len=4096 -rss_limit_mb=3072 \
    -print_final_stats=1 -artifact_prefix="$crashes"/ "$corpus" >"$log" 2>&1; then
  tail -40 "$log"
  echo "fuzz $name: FAILED (log $log, reproducer in $crashes/)"
  exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
echo "fuzz $name: ${runs:-?} executions in $seconds s, ${#kept[@]} kept inputs replayed," \
  "corpus $(ls "$corpus" | wc -l) inputs" | tee "$out/$name.summary"
