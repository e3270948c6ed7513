package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// edge is one entry of an edge record: [dst, ts, value].
type edge struct {
	Dst   int64
	Ts    int64
	Value string
}

func (e *edge) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	bad := json.Unmarshal(b, &parts) != nil || len(parts) != 3
	for _, p := range parts {
		bad = bad || string(p) == "null"
	}
	if bad || json.Unmarshal(parts[0], &e.Dst) != nil || json.Unmarshal(parts[1], &e.Ts) != nil ||
		json.Unmarshal(parts[2], &e.Value) != nil {
		return fmt.Errorf("an edge must be [dst, ts, value], got %s", b)
	}
	return nil
}

// input is an operation's porcupine Input; comparable.
type input struct {
	Key, F, Value string
	Dst, Ts       int64
}

// output is an operation's porcupine Output.
type output struct {
	Unknown bool   // "info": outcome unknown, the model accepts any state
	Code    string // obj_add, obj_update, assoc_update
	Flag    bool   // obj_delete: deleted, assoc_add: replaced, assoc_delete: deleted
	Present bool   // obj_get: value is not null
	Value   string // obj_get
	Count   int64  // assoc_count
	Edges   []edge // assoc_range
}

// History is a parsed history: the operations to check and the initial states.
type History struct {
	Ops                     []porcupine.Operation
	Init                    map[string]interface{} // key -> nodeState or edgeState
	Operations, Keys        int
	NumOk, NumFail, NumInfo int
}

// ParseError is malformed input at a line (1-based).
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

type record struct {
	Type    string          `json:"type"`
	Process *int            `json:"process"`
	F       string          `json:"f"`
	Key     string          `json:"key"`
	Args    json.RawMessage `json:"args"`
	Result  json.RawMessage `json:"result"`
	State   json.RawMessage `json:"state"`
	Time    *int64          `json:"time"`
}

type fields map[string]json.RawMessage

func decodeFields(raw json.RawMessage, what string) (fields, error) {
	var m fields
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s must be an object", what)
	}
	return m, nil
}

// get decodes field name into dst; null is accepted only when nullable.
func (m fields) get(name string, dst interface{}, nullable bool) error {
	raw, ok := m[name]
	if !ok || (!nullable && string(raw) == "null") {
		return fmt.Errorf("missing %q", name)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("bad %q: %v", name, err)
	}
	return nil
}

func keyKind(key string) string {
	p := strings.Split(key, ":")
	if len(p) == 2 && p[0] == "node" && p[1] != "" {
		return "node"
	}
	if len(p) == 3 && p[0] == "edge" && p[1] != "" && p[2] != "" {
		return "edge"
	}
	return ""
}

var opKinds = map[string]string{
	"obj_add": "node", "obj_update": "node", "obj_delete": "node", "obj_get": "node",
	"assoc_add": "edge", "assoc_update": "edge", "assoc_delete": "edge", "assoc_range": "edge", "assoc_count": "edge",
}

func isRead(f string) bool { return f == "obj_get" || f == "assoc_range" || f == "assoc_count" }

func parseInput(r *record) (input, error) {
	in := input{Key: r.Key, F: r.F}
	kind, ok := opKinds[r.F]
	if !ok {
		return in, fmt.Errorf("unknown f %q", r.F)
	}
	if keyKind(r.Key) != kind {
		return in, fmt.Errorf("%s needs a %s key, got %q", r.F, kind, r.Key)
	}
	args, err := decodeFields(r.Args, "args")
	if err != nil {
		return in, err
	}
	switch r.F {
	case "obj_add", "obj_update":
		err = args.get("value", &in.Value, false)
	case "assoc_add", "assoc_update":
		if err = args.get("dst", &in.Dst, false); err == nil {
			if err = args.get("ts", &in.Ts, false); err == nil {
				err = args.get("value", &in.Value, false)
			}
		}
	case "assoc_delete":
		err = args.get("dst", &in.Dst, false)
	}
	return in, err
}

func parseOutput(f string, raw json.RawMessage) (output, error) {
	var out output
	res, err := decodeFields(raw, "result")
	if err != nil {
		return out, err
	}
	switch f {
	case "obj_add", "obj_update", "assoc_update":
		want := map[string]string{"obj_add": "ALREADY_EXISTS", "obj_update": "NOT_FOUND", "assoc_update": "NOT_FOUND"}[f]
		if err = res.get("code", &out.Code, false); err == nil && out.Code != "OK" && out.Code != want {
			err = fmt.Errorf("code must be OK or %s, got %q", want, out.Code)
		}
	case "obj_delete", "assoc_delete":
		err = res.get("deleted", &out.Flag, false)
	case "assoc_add":
		err = res.get("replaced", &out.Flag, false)
	case "obj_get":
		var v *string
		err = res.get("value", &v, true)
		if v != nil {
			out.Present, out.Value = true, *v
		}
	case "assoc_range":
		err = res.get("edges", &out.Edges, false)
	case "assoc_count":
		err = res.get("count", &out.Count, false)
	}
	return out, err
}

func parseInit(r *record) (interface{}, error) {
	st, err := decodeFields(r.State, "state")
	if err != nil {
		return nil, err
	}
	switch keyKind(r.Key) {
	case "node":
		var v *string
		if err := st.get("value", &v, true); err != nil || v == nil {
			return nodeState{}, err
		}
		return nodeState{Present: true, Value: *v}, nil
	case "edge":
		var edges []edge
		if err := st.get("edges", &edges, false); err != nil {
			return nil, err
		}
		seen := map[int64]bool{}
		for _, e := range edges {
			if seen[e.Dst] {
				return nil, fmt.Errorf("dst %d appears twice", e.Dst)
			}
			seen[e.Dst] = true
		}
		return storeOrder(edgeState(edges)), nil
	}
	return nil, fmt.Errorf("bad key %q", r.Key)
}

type pending struct {
	op   porcupine.Operation
	line int
}

type parser struct {
	h       *History
	open    map[int]*pending // process -> its open operation
	clients map[int]int      // process -> dense ClientId
	keys    map[string]bool
}

// ParseHistory reads a JSON-lines history; errors are *ParseError.
func ParseHistory(r io.Reader) (*History, error) {
	ps := &parser{&History{Init: map[string]interface{}{}}, map[int]*pending{}, map[int]int{}, map[string]bool{}}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		text, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return nil, &ParseError{n, err.Error()}
		}
		if strings.TrimSpace(text) != "" {
			if perr := ps.line(n, text); perr != nil {
				return nil, &ParseError{n, perr.Error()}
			}
		}
		if err == io.EOF {
			break
		}
	}
	procs := []int{}
	for p := range ps.open {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	for _, p := range procs { // never completed: outcome unknown
		ps.h.NumInfo++
		ps.add(ps.open[p], output{Unknown: true}, math.MaxInt64)
	}
	ps.h.Keys = len(ps.keys)
	return ps.h, nil
}

func (ps *parser) add(p *pending, out output, ret int64) {
	if out.Unknown && isRead(p.op.Input.(input).F) {
		return // a read of unknown outcome constrains nothing
	}
	p.op.Output, p.op.Return = out, ret
	ps.h.Ops = append(ps.h.Ops, p.op)
}

func (ps *parser) line(n int, text string) error {
	var r record
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return fmt.Errorf("bad JSON: %v", err)
	}
	switch {
	case r.Type == "init":
		if _, dup := ps.h.Init[r.Key]; dup {
			return fmt.Errorf("second init of %q", r.Key)
		}
		st, err := parseInit(&r)
		ps.h.Init[r.Key] = st
		return err
	case r.Type != "invoke" && r.Type != "ok" && r.Type != "fail" && r.Type != "info":
		return fmt.Errorf("unknown type %q", r.Type)
	case r.Process == nil || r.Time == nil:
		return fmt.Errorf("%s needs process and time", r.Type)
	}
	p, t := *r.Process, *r.Time
	pd := ps.open[p]
	if r.Type == "invoke" {
		if pd != nil {
			return fmt.Errorf("process %d invokes while its operation of line %d is open", p, pd.line)
		}
		in, err := parseInput(&r)
		if err != nil {
			return err
		}
		if _, ok := ps.clients[p]; !ok {
			ps.clients[p] = len(ps.clients)
		}
		ps.keys[r.Key] = true
		ps.h.Operations++
		ps.open[p] = &pending{porcupine.Operation{ClientId: ps.clients[p], Input: in, Call: t}, n}
		return nil
	}
	if pd == nil {
		return fmt.Errorf("%s of process %d, which has no open invoke", r.Type, p)
	}
	if in := pd.op.Input.(input); r.F != in.F || r.Key != in.Key {
		return fmt.Errorf("%s %s %q does not match the invoke of line %d", r.Type, r.F, r.Key, pd.line)
	}
	if t < pd.op.Call {
		return fmt.Errorf("completion time %d before invoke time %d", t, pd.op.Call)
	}
	delete(ps.open, p)
	switch r.Type {
	case "ok":
		out, err := parseOutput(r.F, r.Result)
		if err != nil {
			return err
		}
		ps.h.NumOk++
		ps.add(pd, out, t)
	case "fail":
		ps.h.NumFail++
	case "info":
		ps.h.NumInfo++
		ps.add(pd, output{Unknown: true}, math.MaxInt64)
	}
	return nil
}
