#!/usr/bin/env bash
# The main job, from a fresh machine: install, build, generate a sample TAO-like graph, compress it
# into a store, and run queries of every kind on it (embedded mode; the cluster comes with the
# serving milestone).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
zipg=build/client/zipg
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== generate a TAO-like graph: 5000 nodes (40 properties, ~640 B), ~50k edges"
$zipg gen graph --nodes 5000 --seed 7 --out "$work/graph"
echo "== compress it into a store with 2 shards"
$zipg compress --nodes "$work/graph/nodes.csv" --edges "$work/graph/edges.csv" \
  --out "$work/store" --shards 2
q() { echo "-- $*"; $zipg query --store "$work/store" "$@"; }
echo "== queries"
q obj_get --id 42 | cut -c1-300
q get_node_property --id 42 --properties '["p00", "p01"]'
city=$($zipg query --store "$work/store" get_node_property --id 42 --properties '["p00"]' |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["ok"].get("p00", ""))')
q get_node_ids --properties "{\"p00\": \"$city\"}" | cut -c1-300
q assoc_count --id 0 --type 1
q assoc_range --id 0 --type 1 --pos 0 --limit 2 | cut -c1-400
q get_neighbor_ids --id 0 --type 1 | cut -c1-300
q get_neighbor_ids --id 0 --properties "{\"p00\": \"$city\"}"
q get_edge_range --id 0 --type 1 --t_lo 1483228800 --t_hi 1485000000
echo "== the same as a JSON-lines batch (one malformed line in the middle)"
printf '%s\n' '{"op": "assoc_count", "id": 0, "type": 2}' 'not json' \
  '{"op": "get_edge_record", "id": 0, "type": 2}' | $zipg query --store "$work/store" --batch -
