#!/usr/bin/env bash
# The main job, from a fresh machine: install, build, generate a sample TAO-like graph, compress it
# into a store, start a local cluster (etcd, 2 shard-server processes, 2 aggregators; the HTTP API
# and web explorer, Prometheus metrics and a Prometheus server), run queries of every kind through
# it with the CLI, over HTTP and from Python, show the cluster status, and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
zipg=$PWD/build/client/zipg
work=$(mktemp -d)
cleanup() {
  "$zipg" local stop --store "$work/store" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== generate a TAO-like graph: 5000 nodes (40 properties, ~640 B), ~50k edges"
$zipg gen graph --nodes 5000 --seed 7 --out "$work/graph"
echo "== compress it into a store with 4 shards"
$zipg compress --nodes "$work/graph/nodes.csv" --edges "$work/graph/edges.csv" \
  --out "$work/store" --shards 4

echo "== start a local cluster, with the HTTP API and web explorer (--http), Prometheus metrics on"
echo "   every server (--metrics) and a Prometheus server scraping them (--prometheus)"
$zipg local start --store "$work/store" --servers 2 --aggregators 2 --http --metrics --prometheus |
  tee "$work/start.txt"
explorer=$(awk '/^http /{print $2; exit}' "$work/start.txt")
prometheus=$(awk '/^prometheus /{print $2; exit}' "$work/start.txt")
echo "web explorer: $explorer   (open it in a browser while the demo runs)"
echo "Prometheus:   $prometheus"
agg=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["aggregators"][0])' \
  "$work/store/run/cluster.json")
agg2=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["aggregators"][1])' \
  "$work/store/run/cluster.json")
$zipg status --connect "$agg"

q() { echo "-- $*"; $zipg query --connect "$agg" "$@"; }
echo "== queries through aggregator $agg"
q obj_get --id 42 | cut -c1-300
q get_node_property --id 42 --properties '["p00", "p01"]'
city=$($zipg query --connect "$agg" get_node_property --id 42 --properties '["p00"]' |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["ok"].get("p00", ""))')
q get_node_ids --properties "{\"p00\": \"$city\"}" | cut -c1-300
q assoc_count --id 0 --type 1
q assoc_range --id 0 --type 1 --pos 0 --limit 2 | cut -c1-400
q get_neighbor_ids --id 0 --type 1 | cut -c1-300
q get_neighbor_ids --id 0 --properties "{\"p00\": \"$city\"}"
q get_edge_range --id 0 --type 1 --t_lo 1483228800 --t_hi 1485000000
q get_edge_data --id 0 --type 1 --time_order 0 | cut -c1-300
q assoc_time_range --id 0 --type 1 --low 1483228800 --high 1490000000 --limit 2 | cut -c1-300
echo "== search inside values, on the compressed suffix index (docs/search.md)"
word=$(printf '%s' "${city:-a}" | cut -c1-3)
q search_node_ids --pattern "$word" --match prefix --limit 5
q search_node_ids --pattern "${city:-a}" --match exact --property p00 --limit 5
q search_node_ids --pattern "ear" --limit 5
q search_node_ids --pattern "$(printf '%s' "${city:-a}" | tail -c 3)" --match suffix --limit 5
echo "== traversals: shipped to the shard servers that hold each frontier (docs/traversal.md)"
q bfs --id 0 --max_depth 2 --limit 5
q rpq --expr '0/1*' --sources '[0, 42]' --limit 5
q rpq --expr '(0|1)/_' --limit 3
echo "== a JSON-lines batch through the other aggregator $agg2 (one malformed line in the middle)"
printf '%s\n' '{"op": "assoc_count", "id": 0, "type": 2}' 'not json' \
  '{"op": "get_edge_record", "id": 0, "type": 2}' | $zipg query --connect "$agg2" --batch -

echo "== the same operations over HTTP/JSON (docs/operations.md)"
echo "-- POST ${explorer}v1/query"
printf '%s\n' '{"op": "assoc_count", "id": 0, "type": 2}' '{"op": "obj_get", "id": -1}' |
  curl -sS --data-binary @- "${explorer}v1/query"
echo "-- GET ${explorer}v1/nodes/0/edges/1?limit=1"
curl -sS "${explorer}v1/nodes/0/edges/1?limit=1" | cut -c1-300

echo "== writes (to the LogStore through an aggregator), read back through the other aggregator"
w() { echo "-- $*"; $zipg query --connect "$agg" "$@"; }
r() { echo "-- (via $agg2) $*"; $zipg query --connect "$agg2" "$@"; }
w obj_add --id 1000000 --properties '{"p00": "Ithaca", "name": "new node"}'
w assoc_add --src 0 --type 1 --dst 1000000 --timestamp 1500000000 --properties '{"note": "newest"}'
r assoc_range --id 0 --type 1 --pos 0 --limit 1
r get_node_ids --properties '{"name": "new node"}'
r search_node_ids --pattern "new no" --match prefix
w obj_update --id 42 --properties '{"p00": "Ithaca"}'
r obj_get --id 42
echo "== compress the LogStore's log into a new shard now; the data stays the same"
$zipg admin compact --connect "$agg"
r assoc_range --id 0 --type 1 --pos 0 --limit 1
w assoc_delete --src 0 --type 1 --dst 1000000
w obj_delete --id 1000000
r obj_get --id 1000000

echo "== the same cluster from Python (client/python installed into a venv)"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install -q --no-build-isolation ./client/python
"$work/venv/bin/python" - "$agg" <<'PY'
import sys
import zipg

g = zipg.connect(sys.argv[1])
node = g.obj_get(id=42)
print("obj_get(42):", {k: node["properties"][k] for k in sorted(node["properties"])[:3]}, "...")
city = node["properties"].get("p00", "")
print("get_node_ids(p00=%r): %d nodes" % (city, len(g.get_node_ids(properties={"p00": city}))))
print("assoc_range(0, 1, 0, 2):", [(e["dst"], e["timestamp"]) for e in g.assoc_range(id=0, type=1, pos=0, limit=2)])
print("get_neighbor_ids(0, p00=%r):" % city, g.get_neighbor_ids(id=0, properties={"p00": city}))
print("bfs(0, max_depth=2): %d ids" % len(g.bfs(id=0, max_depth=2)))
word = (city or "a")[:3]
print("search_node_ids(%r, match='prefix', limit=3):" % word,
      g.search_node_ids(word, match="prefix", limit=3))
print("rpq('_/_', sources=[0], limit=3):", g.rpq("_/_", sources=[0], limit=3))
try:
    g.obj_get(id=-1)
except zipg.Error as e:
    print("obj_get(-1) ->", e.code, e.message)
PY

echo "== a short TAO-mix load through both aggregators, then LinkBench with writes"
$zipg bench --store "$work/store" --mix tao --connections 4 --duration 3
$zipg bench --store "$work/store" --mix linkbench-rw --connections 4 --duration 3
echo "== what Prometheus saw of that load (Thrift calls/s over every server, their p99 latency)"
sleep 2
for expr in 'sum(rate(zipg_rpc_calls_total{op!="status"}[5s]))' \
            'histogram_quantile(0.99, sum by (le) (rate(zipg_rpc_call_duration_seconds_bucket[5s])))'; do
  echo "-- $expr"
  curl -sS -G "${prometheus}api/v1/query" --data-urlencode "query=$expr" | cut -c1-300
  echo
done
echo "== stop the cluster"
$zipg local stop --store "$work/store"
