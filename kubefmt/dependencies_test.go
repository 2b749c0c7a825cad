package kubefmt

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// a graph as the site leader writes it
const exampleGraph = `{"version":1,"updated":"2026-11-30T06:00:00Z","window":"10m0s","edges":[` +
	`{"from":"checkout","to":"inventory","callsPerSecond":12.5},{"from":"web","to":"checkout","callsPerSecond":40}]}`

func TestDependencyGraphRoundTrip(t *testing.T) {
	g := &DependencyGraph{Version: 1, Updated: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), Window: "10m0s", Edges: []DependencyEdge{
		{"web", "checkout", 40}, {"checkout", "inventory", 12.5}, // unsorted: Encode sorts
	}}
	b, err := g.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != exampleGraph {
		t.Fatalf("encoded\n%s\nwant\n%s", b, exampleGraph)
	}
	back, err := DecodeDependencyGraph(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Edges) != 2 || back.Edges[0] != (DependencyEdge{"checkout", "inventory", 12.5}) || !back.Updated.Equal(g.Updated) {
		t.Fatalf("decoded %+v", back)
	}
	if b2, _ := back.Encode(); string(b2) != string(b) {
		t.Fatalf("re-encoded differs:\n%s", b2)
	}
	// an empty graph is valid and encodes its edges as []
	if b, err := (&DependencyGraph{Version: 1}).Encode(); err != nil || string(b) != `{"version":1,"edges":[]}` {
		t.Fatalf("empty graph: %s, %v", b, err)
	}
}

func TestDecodeDependencyGraphRefuses(t *testing.T) {
	edge := func(from, to string, r string) string {
		return `{"version":1,"edges":[{"from":"` + from + `","to":"` + to + `","callsPerSecond":` + r + `}]}`
	}
	many := `{"version":1,"edges":[` + strings.Repeat(`{"from":"a","to":"b","callsPerSecond":1},`, MaxDependencyEdges) + `{"from":"a","to":"c","callsPerSecond":1}]}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", `version: 1`, "invalid character"},
		{"wrong version", `{"version":2,"edges":[]}`, "version 2"},
		{"no version", `{"edges":[]}`, "version 0"},
		{"unknown field", `{"version":1,"edges":[],"nodes":[]}`, "unknown field"},
		{"trailing data", `{"version":1,"edges":[]} {}`, "data after"},
		{"trailing bracket", `{"version":1,"edges":[]}]`, "invalid character"},
		{"trailing brace", `{"version":1,"edges":[]}}`, "invalid character"},
		{"case-folded keys", `{"Version":1,"EDGES":[]}`, `unknown field "Version"`},
		{"case-folded edge key", `{"version":1,"edges":[{"From":"a","to":"b","callsPerSecond":1}]}`, `unknown field "From"`},
		{"repeated key", `{"version":1,"edges":[],"edges":[{"from":"a","to":"b","callsPerSecond":1}]}`, `"edges" given twice`},
		{"repeated edge key", `{"version":1,"edges":[{"from":"a","from":"c","to":"b","callsPerSecond":1}]}`, `"from" given twice`},
		{"empty from", edge("", "b", "1"), "edges[0].from: empty"},
		{"space in to", edge("a", "b c", "1"), "edges[0].to"},
		{"control character", edge("a\\u0007", "b", "1"), "control"},
		{"long name", edge(strings.Repeat("s", MaxServiceName+1), "b", "1"), "254 bytes"},
		{"zero rate", edge("a", "b", "0"), "callsPerSecond 0"},
		{"negative rate", edge("a", "b", "-3"), "callsPerSecond -3"},
		{"rate too high", edge("a", "b", "1e7"), "callsPerSecond 1e+07"},
		{"rate overflows", edge("a", "b", "1e400"), "cannot unmarshal"},
		{"duplicate edge", `{"version":1,"edges":[{"from":"a","to":"b","callsPerSecond":1},{"from":"a","to":"b","callsPerSecond":2}]}`, "given twice"},
		{"too many edges", many, "4097 edges"},
		{"too large", `{"version":1,"window":"` + strings.Repeat("x", MaxDependencyGraphBytes) + `","edges":[]}`, "bytes, at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := DecodeDependencyGraph([]byte(tc.in))
			if !errors.Is(err, ErrDependencies) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, %v; want ErrDependencies naming %q", g, err, tc.want)
			}
		})
	}
	// Encode refuses what Decode refuses: NaN cannot even be written
	if _, err := (&DependencyGraph{Version: 1, Edges: []DependencyEdge{{"a", "b", math.NaN()}}}).Encode(); !errors.Is(err, ErrDependencies) {
		t.Fatalf("NaN rate encoded: %v", err)
	}
}

func TestServiceOf(t *testing.T) {
	yes := true
	rs := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "ReplicaSet", Name: name, Controller: &yes}}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		want   string
	}{
		{"service label first", map[string]string{LabelService: "cart", "app": "web"}, nil, "cart"},
		{"app.kubernetes.io/name", map[string]string{"app.kubernetes.io/name": "web", "app": "x"}, nil, "web"},
		{"app", map[string]string{"app": "db"}, nil, "db"},
		{"deployment's ReplicaSet without its hash", map[string]string{"pod-template-hash": "7d9f"}, rs("api-7d9f"), "api"},
		{"ReplicaSet without a hash label", nil, rs("api-7d9f"), "api-7d9f"},
		{"StatefulSet", nil, []metav1.OwnerReference{{Kind: "StatefulSet", Name: "pg", Controller: &yes}}, "pg"},
		{"not a controller", nil, []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "x"}}, ""},
		{"nothing", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, OwnerReferences: tc.owners}}
			if got := ServiceOf(p); got != tc.want {
				t.Fatalf("ServiceOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzDecodeDependencyGraph: no input panics, and whatever decodes
// encodes and decodes again to the same graph.
func FuzzDecodeDependencyGraph(f *testing.F) {
	f.Add([]byte(exampleGraph))
	f.Add([]byte(`{"version":1,"edges":[]}`))
	f.Add([]byte(`{"version":1,"edges":[{"from":"a","to":"a","callsPerSecond":1e6}]}`))
	f.Add([]byte(`{"version":1,"edges":[]}]`))
	f.Add([]byte(`{"Version":1,"edges":[],"edges":[{"from":"a","from":"b","to":"c","callsPerSecond":2}]}`))
	f.Add([]byte(`{"version":1,"updated":"2026-11-30T06:00:00Z","window":"1m","edges":[{"from":"a","to":"b","callsPerSecond":1,"x":{"y":[1,{"z":2}]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeDependencyGraph(b)
		if err != nil {
			if !errors.Is(err, ErrDependencies) {
				t.Fatalf("error without ErrDependencies: %v", err)
			}
			return
		}
		enc, err := g.Encode()
		if err != nil {
			t.Fatalf("a decoded graph does not encode: %v", err)
		}
		back, err := DecodeDependencyGraph(enc)
		if err != nil || len(back.Edges) != len(g.Edges) {
			t.Fatalf("round trip: %+v, %v", back, err)
		}
	})
}
