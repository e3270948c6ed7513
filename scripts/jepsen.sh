#!/usr/bin/env bash
# The long Jepsen-style run (tests/jepsen/README.md): one local cluster (`zipg local start
# --servers 2 --replicas 2 --aggregators 2 --lease-ttl 2 --logstores 2`, linearizable reads), the
# sequence of nemeses none, pause-replica, kill-replica, kill-logstore, pause-logstore,
# kill-aggregator, pause-aggregator repeated for about N minutes, one 15 s history each (own keys), every history
# checked by zipg-check. Prints each history's summary and the totals per nemesis (histories,
# operations, anomalies); exits non-zero on any anomaly or failed run check. The histories, their
# checks and HTML visualizations of what failed are kept (the directory is printed; --keep DIR
# keeps every history there).
#
# Usage: scripts/jepsen.sh --minutes N [--zipg BIN] [--seed S] [--keep DIR]
#        (default BIN: build/client/zipg; needs Go on PATH for the checker, and the Python
#        client's build dependencies: thrift, python3-thrift)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=""
zipg=build/client/zipg
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --zipg) zipg=$2; shift 2 ;;
    --seed|--keep) extra+=("$1" "$2"); shift 2 ;;
    *) echo "usage: scripts/jepsen.sh --minutes N [--zipg BIN] [--seed S] [--keep DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "$minutes" ]; then
  echo "usage: scripts/jepsen.sh --minutes N [--zipg BIN] [--seed S] [--keep DIR]" >&2
  exit 2
fi
if ! command -v go >/dev/null; then
  echo "scripts/jepsen.sh: go is not on PATH: the checker (tests/jepsen/checker) cannot be built" >&2
  exit 1
fi
[ -x "$zipg" ] || { echo "scripts/jepsen.sh: no zipg binary at $zipg" >&2; exit 1; }
exec /usr/bin/python3 tests/jepsen/jepsen.py --zipg "$zipg" \
  --nemeses none,pause-replica,kill-replica,kill-logstore,pause-logstore,kill-aggregator,pause-aggregator \
  --seconds 15 --minutes "$minutes" --logstores 2 --read-consistency linearizable ${extra[@]+"${extra[@]}"}
