#!/usr/bin/env bash
# The main job, from a fresh machine: install, build, generate sample text, compress it, query it.
# (Later milestones extend this to the whole graph cluster.)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
zipg=build/client/zipg
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== generate 20 MB of text-like sample data"
$zipg gen text --bytes 20000000 --seed 7 --out "$work/sample.txt"
echo "== compress it"
$zipg file build "$work/sample.txt" "$work/sample.zcf"
echo "== stats"
$zipg file stats "$work/sample.zcf"
echo "== extract 120 bytes at offset 1000000"
$zipg file extract "$work/sample.zcf" 1000000 120; echo
pattern=$($zipg file extract "$work/sample.zcf" 1000010 9)
echo "== count '$pattern'"
$zipg file count "$work/sample.zcf" "$pattern"
echo "== first 5 offsets of '$pattern'"
$zipg file search "$work/sample.zcf" "$pattern" | head -5
