package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

const N, N2, E = "node:1", "node:2", "edge:1:0"

func inv(p int, t int64, f, key, args string) string {
	return fmt.Sprintf(`{"type":"invoke","process":%d,"f":%q,"key":%q,"args":%s,"time":%d}`, p, f, key, args, t)
}

func done(typ string, p int, t int64, f, key, result string) string {
	return fmt.Sprintf(`{"type":%q,"process":%d,"f":%q,"key":%q,"result":%s,"time":%d}`, typ, p, f, key, result, t)
}

// op is an operation of process p that completed ("ok") over [call, ret].
func op(p int, call, ret int64, f, key, args, result string) []string {
	return []string{inv(p, call, f, key, args), done("ok", p, ret, f, key, result)}
}

func val(v string) string  { return fmt.Sprintf(`{"value":%q}`, v) }
func code(c string) string { return fmt.Sprintf(`{"code":%q}`, c) }
func eargs(dst, ts int, v string) string {
	return fmt.Sprintf(`{"dst":%d,"ts":%d,"value":%q}`, dst, ts, v)
}

const null, none = `{"value":null}`, `{}`

func join(parts ...[]string) string {
	var all []string
	for _, p := range parts {
		all = append(all, p...)
	}
	return strings.Join(all, "\n") + "\n"
}

func check(t *testing.T, parts ...[]string) Report {
	t.Helper()
	h, err := ParseHistory(strings.NewReader(join(parts...)))
	if err != nil {
		t.Fatal(err)
	}
	rep, _, _ := Check(h, 30*time.Second)
	return rep
}

// expect asserts the verdict: linearizable if no bad keys are given, else exactly those keys are bad.
func expect(t *testing.T, what string, rep Report, bad ...string) {
	t.Helper()
	if bad == nil {
		bad = []string{}
	}
	if rep.Linearizable != (len(bad) == 0) || rep.Unknown || !reflect.DeepEqual(rep.BadKeys, bad) {
		t.Errorf("%s: got linearizable=%v unknown=%v bad=%v, want bad=%v", what, rep.Linearizable, rep.Unknown, rep.BadKeys, bad)
	}
}

func TestRegister(t *testing.T) {
	rep := check(t,
		op(3, 2, 4, "obj_get", N, none, null),
		op(0, 0, 10, "obj_add", N, val("v1"), code("OK")),
		op(1, 5, 20, "obj_update", N, val("v2"), code("OK")),
		op(2, 6, 8, "obj_get", N, none, val("v1")),
		op(2, 12, 25, "obj_get", N, none, val("v2")),
		op(3, 13, 14, "obj_get", N, none, val("v1")))
	expect(t, "concurrent writes and reads", rep)
	if rep.Operations != 6 || rep.Keys != 1 || rep.Ok != 6 || rep.Fail != 0 || rep.Info != 0 {
		t.Errorf("counts: %+v", rep)
	}
	write := [][]string{op(0, 0, 10, "obj_add", N, val("v1"), code("OK")), op(0, 11, 20, "obj_update", N, val("v2"), code("OK")),
		op(2, 0, 5, "obj_add", N2, val("x"), code("OK")), op(2, 6, 7, "obj_get", N2, none, val("x"))}
	expect(t, "stale read", check(t, append(write, op(1, 21, 30, "obj_get", N, none, val("v1")))...), N)
	expect(t, "read concurrent with the write", check(t, append(write, op(1, 15, 30, "obj_get", N, none, val("v1")))...))
	expect(t, "value never written", check(t, append(write, op(1, 1, 30, "obj_get", N, none, val("v9")))...), N)
	failed := []string{inv(1, 12, "obj_update", N, val("v9")), done("fail", 1, 13, "obj_update", N, none)}
	rep = check(t, append(write, failed, op(1, 21, 30, "obj_get", N, none, val("v9")))...)
	expect(t, "failed write seen", rep, N)
	if rep.Operations != 6 || rep.Keys != 2 || rep.Ok != 5 || rep.Fail != 1 {
		t.Errorf("counts: %+v", rep)
	}
}

func TestInfoWrite(t *testing.T) {
	add := op(0, 0, 5, "obj_add", N, val("v1"), code("OK"))
	for _, unknown := range [][]string{
		{inv(1, 10, "obj_update", N, val("v2")), `{"type":"info","process":1,"f":"obj_update","key":"node:1","time":20}`},
		{inv(1, 10, "obj_update", N, val("v2"))}, // never completed
	} {
		rep := check(t, add, unknown, op(2, 30, 40, "obj_get", N, none, val("v1")), op(2, 50, 60, "obj_get", N, none, val("v2")))
		expect(t, "info write visible later", rep)
		if rep.Info != 1 || rep.Ok != 3 {
			t.Errorf("counts: %+v", rep)
		}
		expect(t, "info write never applied", check(t, add, unknown, op(2, 30, 40, "obj_get", N, none, val("v1"))))
		expect(t, "info write undone", check(t, add, unknown, op(2, 30, 40, "obj_get", N, none, val("v2")),
			op(2, 50, 60, "obj_get", N, none, val("v1"))), N)
	}
}

func TestConditionalCodes(t *testing.T) {
	add := op(0, 0, 5, "obj_add", N, val("v1"), code("OK"))
	expect(t, "add OK while present", check(t, add, op(1, 10, 15, "obj_add", N, val("v2"), code("OK"))), N)
	expect(t, "add ALREADY_EXISTS while present", check(t, add, op(1, 10, 15, "obj_add", N, val("v2"), code("ALREADY_EXISTS")),
		op(1, 16, 17, "obj_get", N, none, val("v1"))))
	expect(t, "add ALREADY_EXISTS while absent", check(t, op(1, 10, 15, "obj_add", N, val("v2"), code("ALREADY_EXISTS"))), N)
	expect(t, "add OK after a concurrent delete", check(t, add, op(2, 8, 12, "obj_delete", N, none, `{"deleted":true}`),
		op(1, 10, 15, "obj_add", N, val("v2"), code("OK")), op(1, 16, 17, "obj_get", N, none, val("v2"))))
	expect(t, "update OK while absent", check(t, op(0, 0, 5, "obj_update", N, val("v"), code("OK"))), N)
	expect(t, "update NOT_FOUND while absent", check(t, op(0, 0, 5, "obj_update", N, val("v"), code("NOT_FOUND")),
		op(0, 6, 7, "obj_get", N, none, null)))
	expect(t, "delete of absent says deleted", check(t, op(0, 0, 5, "obj_delete", N, none, `{"deleted":true}`)), N)
}

func TestEdges(t *testing.T) {
	rep := check(t,
		op(0, 0, 10, "assoc_add", E, eargs(1, 10, "a"), `{"replaced":false}`),
		op(1, 5, 15, "assoc_add", E, eargs(2, 20, "b"), `{"replaced":false}`),
		op(2, 6, 12, "assoc_range", E, none, `{"edges":[[1,10,"a"]]}`),
		op(3, 7, 30, "assoc_count", E, none, `{"count":1}`),
		op(0, 16, 25, "assoc_delete", E, `{"dst":1}`, `{"deleted":true}`),
		op(2, 20, 22, "assoc_range", E, none, `{"edges":[[2,20,"b"],[1,10,"a"]]}`),
		op(1, 31, 35, "assoc_range", E, none, `{"edges":[[2,20,"b"]]}`),
		op(1, 36, 40, "assoc_update", E, eargs(2, 5, "c"), code("OK")),
		op(1, 41, 42, "assoc_add", E, eargs(2, 6, "d"), `{"replaced":true}`),
		op(1, 43, 44, "assoc_count", E, none, `{"count":1}`))
	expect(t, "concurrent edge operations", rep)

	add := op(0, 0, 5, "assoc_add", E, eargs(1, 10, "a"), `{"replaced":false}`)
	seen := op(1, 10, 15, "assoc_range", E, none, `{"edges":[[1,10,"a"]]}`)
	gone := op(1, 20, 25, "assoc_range", E, none, `{"edges":[]}`)
	expect(t, "edge vanishes", check(t, add, seen, gone), E)
	expect(t, "edge deleted in between", check(t, add, seen, op(2, 16, 18, "assoc_delete", E, `{"dst":1}`, `{"deleted":true}`), gone))
	expect(t, "update of a missing edge", check(t, op(0, 0, 5, "assoc_update", E, eargs(1, 1, "a"), code("OK"))), E)

	three := [][]string{add, op(0, 6, 7, "assoc_add", E, eargs(3, 20, "c"), `{"replaced":false}`),
		op(0, 8, 9, "assoc_add", E, eargs(2, 20, "b"), `{"replaced":false}`)}
	for edges, ok := range map[string]bool{
		`[[2,20,"b"],[3,20,"c"],[1,10,"a"]]`: true,
		`[[3,20,"c"],[2,20,"b"],[1,10,"a"]]`: false, // ties must be by dst ascending
		`[[1,10,"a"],[2,20,"b"],[3,20,"c"]]`: false, // ts must be descending
		`[[2,20,"b"],[3,20,"c"]]`:            false,
	} {
		rep := check(t, append(three, op(1, 10, 11, "assoc_range", E, none, `{"edges":`+edges+`}`))...)
		if rep.Linearizable != ok {
			t.Errorf("range %s: linearizable=%v, want %v", edges, rep.Linearizable, ok)
		}
	}
}

func TestInit(t *testing.T) {
	inits := []string{`{"type":"init","key":"node:1","state":{"value":"x"}}`,
		`{"type":"init","key":"edge:1:0","state":{"edges":[[5,1,"a"],[6,2,"b"]]}}`}
	expect(t, "initial states", check(t, inits, op(0, 0, 1, "obj_get", N, none, val("x")),
		op(0, 2, 3, "obj_add", N, val("y"), code("ALREADY_EXISTS")), op(0, 4, 5, "obj_get", N2, none, null),
		op(1, 0, 1, "assoc_range", E, none, `{"edges":[[6,2,"b"],[5,1,"a"]]}`), op(1, 2, 3, "assoc_count", E, none, `{"count":2}`)))
	expect(t, "node ignoring init", check(t, inits, op(0, 0, 1, "obj_get", N, none, null)), N)
	expect(t, "edges ignoring init", check(t, inits, op(1, 2, 3, "assoc_count", E, none, `{"count":0}`)), E)
}

// genSequential simulates the store (independently of the model) with random
// operations, one at a time; it returns the events and the indexes of the reads' "ok" events.
func genSequential(rng *rand.Rand, n int) ([]map[string]interface{}, []int) {
	type ev = map[string]interface{}
	nodes := map[string]string{}
	recs := map[string]map[int64][]interface{}{"edge:1:0": {}, "edge:2:0": {}}
	events := []ev{{"type": "init", "key": "node:2", "state": ev{"value": "init"}}, {"type": "init", "key": "edge:2:0",
		"state": ev{"edges": [][]interface{}{{int64(7), int64(1), "init"}}}}}
	nodes["node:2"], recs["edge:2:0"][7] = "init", []interface{}{int64(7), int64(1), "init"}
	var reads []int
	for i := 0; i < n; i++ {
		p, t, v := rng.Intn(3), int64(1000+2*i), fmt.Sprintf("v%d", i)
		key, f, args, res := "", "", ev{}, ev{}
		var apply func()
		if rng.Intn(2) == 0 {
			key, f = []string{"node:1", "node:2"}[rng.Intn(2)], []string{"obj_add", "obj_update", "obj_delete", "obj_get"}[rng.Intn(4)]
			cur, present := nodes[key]
			set := func() { nodes[key] = v }
			switch {
			case f == "obj_add" || f == "obj_update":
				args["value"], res["code"] = v, "OK"
				if present == (f == "obj_add") {
					res["code"] = map[string]string{"obj_add": "ALREADY_EXISTS", "obj_update": "NOT_FOUND"}[f]
				} else {
					apply = set
				}
			case f == "obj_delete":
				res["deleted"], apply = present, func() { delete(nodes, key) }
			case present:
				res["value"] = cur
			default:
				res["value"] = nil
			}
		} else {
			key, f = []string{"edge:1:0", "edge:2:0"}[rng.Intn(2)], []string{"assoc_add", "assoc_update", "assoc_delete", "assoc_range", "assoc_count"}[rng.Intn(5)]
			rec, dst, ts := recs[key], int64(1+rng.Intn(4)), int64(1+rng.Intn(3))
			_, present := rec[dst]
			switch f {
			case "assoc_add", "assoc_update":
				args["dst"], args["ts"], args["value"] = dst, ts, v
				res["replaced"], apply = present, func() { rec[dst] = []interface{}{dst, ts, v} }
				if f == "assoc_update" {
					delete(res, "replaced")
					res["code"] = map[bool]string{true: "OK", false: "NOT_FOUND"}[present]
					if !present {
						apply = nil
					}
				}
			case "assoc_delete":
				args["dst"], res["deleted"], apply = dst, present, func() { delete(rec, dst) }
			case "assoc_range":
				edges := [][]interface{}{}
				for _, e := range rec {
					edges = append(edges, e)
				}
				sort.Slice(edges, func(i, j int) bool {
					a, b := edges[i], edges[j]
					return a[1].(int64) > b[1].(int64) || (a[1] == b[1] && a[0].(int64) < b[0].(int64))
				})
				res["edges"] = edges
			case "assoc_count":
				res["count"] = len(rec)
			}
		}
		events = append(events, ev{"type": "invoke", "process": p, "f": f, "key": key, "args": args, "time": t})
		end := ev{"type": "ok", "process": p, "f": f, "key": key, "result": res, "time": t + 1}
		switch r := rng.Intn(20); {
		case r == 0: // certainly not applied
			end["type"], apply = "fail", nil
		case r == 1: // applied, but the client does not know
			end["type"] = "info"
			delete(end, "result")
		case isRead(f):
			reads = append(reads, len(events))
		}
		if apply != nil {
			apply()
		}
		events = append(events, end)
	}
	return events, reads
}

func eventsText(t *testing.T, events []map[string]interface{}) string {
	var b bytes.Buffer
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.String()
}

func TestRandomSequential(t *testing.T) {
	for seed := int64(1); seed <= 25; seed++ {
		rng := rand.New(rand.NewSource(seed))
		events, reads := genSequential(rng, 300)
		h, err := ParseHistory(strings.NewReader(eventsText(t, events)))
		if err != nil {
			t.Fatal(err)
		}
		rep, _, _ := Check(h, 30*time.Second)
		expect(t, fmt.Sprintf("seed %d", seed), rep)
		if rep.Operations != 300 || rep.Ok+rep.Fail+rep.Info != 300 || rep.Keys != 4 {
			t.Errorf("seed %d: counts %+v", seed, rep)
		}
		// Corrupt one read to an answer no reordering can explain.
		e := events[reads[rng.Intn(len(reads))]]
		res := e["result"].(map[string]interface{})
		switch e["f"] {
		case "obj_get":
			res["value"] = "corrupt"
		case "assoc_count":
			res["count"] = 1000
		case "assoc_range":
			res["edges"] = append([][]interface{}{{99, 0, "corrupt"}}, res["edges"].([][]interface{})...)
		}
		h, err = ParseHistory(strings.NewReader(eventsText(t, events)))
		if err != nil {
			t.Fatal(err)
		}
		rep, _, _ = Check(h, 30*time.Second)
		expect(t, fmt.Sprintf("seed %d corrupted %v", seed, e), rep, e["key"].(string))
	}
}

func TestMalformed(t *testing.T) {
	get := inv(0, 5, "obj_get", N, none)
	for _, c := range []struct {
		text string
		line int
		msg  string
	}{
		{get + "\n\n{bad", 3, "bad JSON"},
		{`{"type":"bogus"}`, 1, `unknown type "bogus"`},
		{inv(0, 1, "obj_frob", N, none), 1, `unknown f "obj_frob"`},
		{inv(0, 1, "obj_add", E, val("x")), 1, "needs a node key"},
		{inv(0, 1, "assoc_count", "edge:1", none), 1, "needs a edge key"},
		{inv(0, 1, "obj_add", N, none), 1, `missing "value"`},
		{inv(0, 1, "obj_add", N, null), 1, `missing "value"`},
		{inv(0, 1, "assoc_add", E, `{"dst":1,"ts":"x","value":"a"}`), 1, `bad "ts"`},
		{`{"type":"invoke","process":0,"f":"obj_get","key":"node:1","args":{}}`, 1, "needs process and time"},
		{done("ok", 0, 1, "obj_get", N, val("x")), 1, "no open invoke"},
		{get + "\n" + get, 2, "while its operation of line 1 is open"},
		{get + "\n" + done("ok", 0, 4, "obj_get", N, null), 2, "before invoke time"},
		{get + "\n" + done("ok", 0, 6, "obj_get", N2, null), 2, "does not match"},
		{get + "\n" + `{"type":"ok","process":0,"f":"obj_get","key":"node:1","time":6}`, 2, "result must be an object"},
		{get + "\n" + done("ok", 0, 6, "obj_get", N, none), 2, `missing "value"`},
		{inv(0, 1, "obj_add", N, val("x")) + "\n" + done("ok", 0, 2, "obj_add", N, code("NOT_FOUND")), 2, "code must be OK or ALREADY_EXISTS"},
		{inv(0, 1, "assoc_range", E, none) + "\n" + done("ok", 0, 2, "assoc_range", E, `{"edges":[[1,2]]}`), 2, "[dst, ts, value]"},
		{`{"type":"init","key":"edge:1:0","state":{"edges":[[1,1,"a"],[1,2,"b"]]}}`, 1, "dst 1 appears twice"},
	} {
		_, err := ParseHistory(strings.NewReader(c.text))
		pe, ok := err.(*ParseError)
		if !ok || pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("%q: got %v, want line %d: ...%s...", c.text, err, c.line, c.msg)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, parts ...[]string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(join(parts...)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.jsonl", op(0, 0, 5, "obj_add", N, val("v1"), code("OK")), op(1, 6, 7, "obj_get", N, none, val("v1")))
	bad := write("bad.jsonl", op(0, 0, 5, "obj_add", N, val("v1"), code("OK")), op(1, 6, 7, "obj_get", N, none, null))
	malformed := write("malformed.jsonl", op(0, 0, 5, "obj_add", N, val("v1"), code("OK")), []string{`{"type":"nope"}`})
	var adds [][]string // 18 concurrent adds, then an impossible count: 2^18 states to explore
	for i := 0; i < 18; i++ {
		adds = append(adds, op(i, 0, 10, "assoc_add", E, eargs(i, 1, "a"), `{"replaced":false}`))
	}
	slow := write("slow.jsonl", append(adds, op(0, 20, 30, "assoc_count", E, none, `{"count":1000}`))...)
	html := filepath.Join(dir, "out.html")
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--json", good}, 0, `{"operations":2,"keys":1,"ok":2,"fail":0,"info":0,"linearizable":true,"unknown":false,"bad_keys":[]}`},
		{[]string{good}, 0, "verdict: linearizable"},
		{[]string{bad, "--json"}, 1, `"linearizable":false,"unknown":false,"bad_keys":["node:1"]}`},
		{[]string{"--html", html, bad}, 1, "not linearizable: node:1\nvisualization: " + html},
		{[]string{"--json", malformed}, 2, "line 3: unknown type"},
		{[]string{"--timeout", "1ms", "--json", slow}, 3, `"unknown":true`},
		{[]string{good, bad}, 2, "usage"},
	} {
		var out, errOut bytes.Buffer
		got := run(c.args, &out, &errOut)
		if got != c.code || !strings.Contains(out.String()+errOut.String(), c.out) {
			t.Errorf("%v: exit %d, output %q %q; want exit %d with %q", c.args, got, out.String(), errOut.String(), c.code, c.out)
		}
	}
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("node:1 obj_get()")) {
		t.Errorf("visualization not written: %v", err)
	}
}
