package kubefmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgesched/edgesched/sim"
)

// PodRef names a pod: namespace/name.
type PodRef struct{ Namespace, Name string }

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// FlowsAnnotation is the Node annotation in which each agent publishes
// the pod-to-pod call rates its node's flow collector measured, so that
// every agent of the site (the leader and its warm standbys) records the
// whole site's dependency graph, not only its own node's.
const FlowsAnnotation = "edgesched.io/flows"

// Limits of the flows annotation.
const (
	// MaxFlowsBytes caps an annotation value.
	MaxFlowsBytes = 32 << 10
	// MaxFlowEdges caps the edges in one annotation (the busiest are kept).
	MaxFlowEdges = 256
)

// ErrFlows wraps refusals of DecodeFlows.
var ErrFlows = errors.New("kubefmt: bad flows annotation")

// Flows is one node's published call rates over Window, ending at Time.
type Flows struct {
	Time   time.Time
	Window time.Duration
	Edges  []FlowEdge
}

// FlowEdge is the call rate from one pod to another.
type FlowEdge struct {
	Src, Dst       PodRef
	CallsPerSecond float64
}

// flowsWire is the JSON form:
//
//	{"v":1,"ts":"2026-01-02T15:04:05Z","window":"10s",
//	 "edges":[{"src":"shop/cart-7d9f-x2","dst":"shop/db-0","cps":12.5}]}
type flowsWire struct {
	V      int        `json:"v"`
	TS     string     `json:"ts"`
	Window string     `json:"window"`
	Edges  []edgeWire `json:"edges"`
}

type edgeWire struct {
	Src string  `json:"src"`
	Dst string  `json:"dst"`
	CPS float64 `json:"cps"`
}

// EncodeFlows renders f (its busiest MaxFlowEdges edges, rates rounded
// to 3 decimals, time in UTC seconds) as the annotation value.
func EncodeFlows(f Flows) (string, error) {
	edges := slices.Clone(f.Edges)
	slices.SortFunc(edges, func(a, b FlowEdge) int {
		if a.CallsPerSecond != b.CallsPerSecond {
			if a.CallsPerSecond > b.CallsPerSecond {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Src.String()+">"+a.Dst.String(), b.Src.String()+">"+b.Dst.String())
	})
	if len(edges) > MaxFlowEdges {
		edges = edges[:MaxFlowEdges]
	}
	w := flowsWire{V: 1, TS: f.Time.UTC().Truncate(time.Second).Format(time.RFC3339), Window: f.Window.String(), Edges: []edgeWire{}}
	for _, e := range edges {
		w.Edges = append(w.Edges, edgeWire{Src: e.Src.String(), Dst: e.Dst.String(), CPS: math.Round(e.CallsPerSecond*1000) / 1000})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrFlows, err)
	}
	if _, err := DecodeFlows(string(b)); err != nil {
		return "", err
	}
	return string(b), nil
}

// DecodeFlows parses and checks an annotation value: strict JSON (no
// unknown fields, no trailing data), version 1, an RFC 3339 time, a window
// in [1s, 1h], at most MaxFlowEdges edges naming pods as namespace/name
// (a DNS label and a DNS subdomain), rates finite in [0, 1e9].
func DecodeFlows(s string) (Flows, error) {
	var f Flows
	if len(s) > MaxFlowsBytes {
		return f, fmt.Errorf("%w: %d bytes (limit %d)", ErrFlows, len(s), MaxFlowsBytes)
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var w flowsWire
	if err := dec.Decode(&w); err != nil {
		return f, fmt.Errorf("%w: %v", ErrFlows, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return f, fmt.Errorf("%w: trailing data", ErrFlows)
	}
	if w.V != 1 {
		return f, fmt.Errorf("%w: version %d, this build reads 1", ErrFlows, w.V)
	}
	t, err := time.Parse(time.RFC3339, w.TS)
	if err != nil {
		return f, fmt.Errorf("%w: ts: %v", ErrFlows, err)
	}
	win, err := time.ParseDuration(w.Window)
	if err != nil || win < time.Second || win > time.Hour {
		return f, fmt.Errorf("%w: window %q, want a duration in [1s, 1h]", ErrFlows, w.Window)
	}
	if len(w.Edges) > MaxFlowEdges {
		return f, fmt.Errorf("%w: %d edges (limit %d)", ErrFlows, len(w.Edges), MaxFlowEdges)
	}
	f.Time, f.Window = t.UTC(), win
	for i, e := range w.Edges {
		src, err1 := parsePodRef(e.Src)
		dst, err2 := parsePodRef(e.Dst)
		if err := errors.Join(err1, err2); err != nil {
			return Flows{}, fmt.Errorf("%w: edges[%d]: %v", ErrFlows, i, err)
		}
		if math.IsNaN(e.CPS) || e.CPS < 0 || e.CPS > sim.MaxCallRate {
			return Flows{}, fmt.Errorf("%w: edges[%d].cps %v, want a rate in [0, %g]", ErrFlows, i, e.CPS, float64(sim.MaxCallRate))
		}
		f.Edges = append(f.Edges, FlowEdge{Src: src, Dst: dst, CallsPerSecond: e.CPS})
	}
	return f, nil
}

func parsePodRef(s string) (PodRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return PodRef{}, fmt.Errorf("pod %q is not namespace/name", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return PodRef{}, fmt.Errorf("pod %q: namespace: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return PodRef{}, fmt.Errorf("pod %q: name: %s", s, strings.Join(errs, "; "))
	}
	return PodRef{Namespace: ns, Name: name}, nil
}
