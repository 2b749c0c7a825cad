package kubefmt

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var flowsT0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

func TestFlowsRoundTrip(t *testing.T) {
	f := Flows{Time: flowsT0, Window: 10 * time.Second, Edges: []FlowEdge{
		{Src: PodRef{Namespace: "shop", Name: "cart-1"}, Dst: PodRef{Namespace: "shop", Name: "db-0"}, CallsPerSecond: 2.5},
		{Src: PodRef{Namespace: "shop", Name: "web-1"}, Dst: PodRef{Namespace: "shop", Name: "cart-1"}, CallsPerSecond: 12.3456},
	}}
	v, err := EncodeFlows(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFlows(v)
	if err != nil {
		t.Fatal(err)
	}
	// sorted busiest first, rates rounded to 3 decimals
	if len(got.Edges) != 2 || got.Edges[0].CallsPerSecond != 12.346 || got.Edges[1].Src.Name != "cart-1" || !got.Time.Equal(flowsT0) || got.Window != 10*time.Second {
		t.Fatalf("round trip: %+v from %s", got, v)
	}
	// more than MaxFlowEdges: the busiest are kept
	var many Flows
	many.Time, many.Window = flowsT0, time.Minute
	for i := range MaxFlowEdges + 10 {
		many.Edges = append(many.Edges, FlowEdge{Src: PodRef{Namespace: "a", Name: fmt.Sprintf("p%d", i)}, Dst: PodRef{Namespace: "a", Name: "db"}, CallsPerSecond: float64(i)})
	}
	v, err = EncodeFlows(many)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = DecodeFlows(v)
	// rates 0..265: the 256 kept are 10..265
	if len(got.Edges) != MaxFlowEdges || got.Edges[len(got.Edges)-1].CallsPerSecond != 10 {
		t.Fatalf("kept %d edges, the smallest %v; want %d and 10", len(got.Edges), got.Edges[len(got.Edges)-1].CallsPerSecond, MaxFlowEdges)
	}
}

func TestFlowsRefusals(t *testing.T) {
	ok := `{"v":1,"ts":"2026-03-01T08:00:00Z","window":"10s","edges":[{"src":"a/b","dst":"a/c","cps":1}]}`
	if _, err := DecodeFlows(ok); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, v, want string }{
		{"syntax", `{"v":1`, "unexpected EOF"},
		{"unknown field", strings.Replace(ok, `"v":1`, `"v":1,"x":2`, 1), "unknown field"},
		{"trailing", ok + `{}`, "trailing"},
		{"version", strings.Replace(ok, `"v":1`, `"v":2`, 1), "version 2"},
		{"time", strings.Replace(ok, `2026-03-01T08:00:00Z`, `yesterday`, 1), "ts"},
		{"window", strings.Replace(ok, `"10s"`, `"2h"`, 1), "window"},
		{"pod ref", strings.Replace(ok, `"a/b"`, `"b"`, 1), "not namespace/name"},
		{"namespace", strings.Replace(ok, `"a/b"`, `"A_/b"`, 1), "namespace"},
		{"negative rate", strings.Replace(ok, `"cps":1`, `"cps":-1`, 1), "cps"},
		{"huge", strings.Repeat(" ", MaxFlowsBytes+1), "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeFlows(tc.v)
			if !errors.Is(err, ErrFlows) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrFlows mentioning %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeFlows: any value decodes or is refused with ErrFlows; what
// decodes re-encodes and decodes to the same edges.
func FuzzDecodeFlows(f *testing.F) {
	f.Add(`{"v":1,"ts":"2026-03-01T08:00:00Z","window":"10s","edges":[{"src":"a/b","dst":"a/c","cps":1.5}]}`)
	f.Add(`{"v":1,"ts":"2026-03-01T08:00:00Z","window":"1m0s","edges":[]}`)
	f.Fuzz(func(t *testing.T, v string) {
		fl, err := DecodeFlows(v)
		if err != nil {
			if !errors.Is(err, ErrFlows) {
				t.Fatalf("error without ErrFlows: %v", err)
			}
			return
		}
		v2, err := EncodeFlows(fl)
		if err != nil {
			t.Fatalf("decoded flows do not encode: %v", err)
		}
		fl2, err := DecodeFlows(v2)
		if err != nil || len(fl2.Edges) != len(fl.Edges) {
			t.Fatalf("re-encoded flows differ: %v", err)
		}
	})
}
