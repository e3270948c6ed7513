package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// nodeState is a node key's state: absent, or present with a value.
type nodeState struct {
	Present bool
	Value   string // "" when absent
}

// edgeState is an edge record in the store's order: ts descending, dst ascending.
type edgeState []edge

func storeOrder(s edgeState) edgeState {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Ts != s[j].Ts {
			return s[i].Ts > s[j].Ts
		}
		return s[i].Dst < s[j].Dst
	})
	return s
}

func edgesEqual(a, b []edge) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// without returns a copy of s without index skip (-1: a plain copy), room for one more.
func without(s edgeState, skip int) edgeState {
	r := make(edgeState, 0, len(s)+1)
	for i, e := range s {
		if i != skip {
			r = append(r, e)
		}
	}
	return r
}

func stepNode(s nodeState, in input, out output) (bool, interface{}) {
	switch in.F {
	case "obj_add":
		if s.Present {
			return out.Unknown || out.Code == "ALREADY_EXISTS", s
		}
		return out.Unknown || out.Code == "OK", nodeState{true, in.Value}
	case "obj_update":
		if !s.Present {
			return out.Unknown || out.Code == "NOT_FOUND", s
		}
		return out.Unknown || out.Code == "OK", nodeState{true, in.Value}
	case "obj_delete":
		return out.Unknown || out.Flag == s.Present, nodeState{}
	case "obj_get":
		return out.Unknown || (out.Present == s.Present && out.Value == s.Value), s
	}
	return false, s
}

func stepEdges(s edgeState, in input, out output) (bool, interface{}) {
	at := -1
	for i, e := range s {
		if e.Dst == in.Dst {
			at = i
		}
	}
	e := edge{in.Dst, in.Ts, in.Value}
	switch in.F {
	case "assoc_add":
		return out.Unknown || out.Flag == (at >= 0), storeOrder(append(without(s, at), e))
	case "assoc_update":
		if at < 0 {
			return out.Unknown || out.Code == "NOT_FOUND", s
		}
		return out.Unknown || out.Code == "OK", storeOrder(append(without(s, at), e))
	case "assoc_delete":
		return out.Unknown || out.Flag == (at >= 0), without(s, at)
	case "assoc_range":
		return out.Unknown || edgesEqual(out.Edges, s), s
	case "assoc_count":
		return out.Unknown || out.Count == int64(len(s)), s
	}
	return false, s
}

// groupByKey splits ops by key, keys sorted; porcupine's Partition uses it,
// so partition i of the LinearizationInfo is keys[i].
func groupByKey(ops []porcupine.Operation) ([]string, [][]porcupine.Operation) {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range ops {
		k := op.Input.(input).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		parts[i] = byKey[k]
	}
	return keys, parts
}

func describeEdges(es []edge) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = fmt.Sprintf("%d@%d=%q", e.Dst, e.Ts, e.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeOp(i, o interface{}) string {
	in, out := i.(input), o.(output)
	v, e := fmt.Sprintf("%q", in.Value), describeEdges([]edge{{in.Dst, in.Ts, in.Value}})
	args := map[string]string{"obj_add": v, "obj_update": v, "assoc_add": e, "assoc_update": e,
		"assoc_delete": fmt.Sprint(in.Dst)}[in.F]
	res := "?"
	switch {
	case out.Unknown:
	case in.F == "obj_get":
		res = map[bool]string{true: fmt.Sprintf("%q", out.Value), false: "null"}[out.Present]
	case in.F == "assoc_range":
		res = describeEdges(out.Edges)
	case in.F == "assoc_count":
		res = fmt.Sprint(out.Count)
	case out.Code != "":
		res = out.Code
	default:
		res = fmt.Sprint(out.Flag)
	}
	return fmt.Sprintf("%s %s(%s) -> %s", in.Key, in.F, args, res)
}

// newModel is the model of all keys; a key's initial state comes from init
// (absent node / empty record otherwise) and is taken at the key's first step.
func newModel(init map[string]interface{}) porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			_, parts := groupByKey(ops)
			return parts
		},
		Init: func() interface{} { return nil },
		Step: func(st, i, o interface{}) (bool, interface{}) {
			in := i.(input)
			if st == nil {
				st = init[in.Key]
			}
			if keyKind(in.Key) == "node" {
				s, _ := st.(nodeState)
				return stepNode(s, in, o.(output))
			}
			s, _ := st.(edgeState)
			return stepEdges(s, in, o.(output))
		},
		Equal: func(a, b interface{}) bool {
			ea, okA := a.(edgeState)
			eb, okB := b.(edgeState)
			if okA && okB {
				return edgesEqual(ea, eb)
			}
			return a == b
		},
		DescribeOperation: describeOp,
		DescribeState: func(st interface{}) string {
			switch s := st.(type) {
			case nodeState:
				if s.Present {
					return fmt.Sprintf("%q", s.Value)
				}
				return "absent"
			case edgeState:
				return describeEdges(s)
			}
			return "initial"
		},
	}
}

// Report is the checker's verdict; its JSON form is the --json output.
type Report struct {
	Operations   int      `json:"operations"`
	Keys         int      `json:"keys"`
	Ok           int      `json:"ok"`
	Fail         int      `json:"fail"`
	Info         int      `json:"info"`
	Linearizable bool     `json:"linearizable"`
	Unknown      bool     `json:"unknown"`
	BadKeys      []string `json:"bad_keys"`
}

// Check runs porcupine over h, partitioned by key (timeout 0: no limit).
func Check(h *History, timeout time.Duration) (Report, porcupine.Model, porcupine.LinearizationInfo) {
	model := newModel(h.Init)
	res, info := porcupine.CheckOperationsVerbose(model, h.Ops, timeout)
	rep := Report{Operations: h.Operations, Keys: h.Keys, Ok: h.NumOk, Fail: h.NumFail, Info: h.NumInfo,
		Linearizable: res == porcupine.Ok, Unknown: res == porcupine.Unknown, BadKeys: []string{}}
	if res == porcupine.Illegal {
		// A key is linearizable iff porcupine found a linearization of all its operations.
		keys, parts := groupByKey(h.Ops)
		partials := info.PartialLinearizations()
		for i, k := range keys {
			full := false
			for _, l := range partials[i] {
				full = full || len(l) == len(parts[i])
			}
			if !full {
				rep.BadKeys = append(rep.BadKeys, k)
			}
		}
	}
	return rep, model, info
}
