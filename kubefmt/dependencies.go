package kubefmt

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The service dependency graph: which service calls which, and how
// often. The site leader writes it from the call rates the agents measure
// between pods (eBPF flows, the site trace); an operator may write it by
// hand instead. The scheduler plugin reads it, with each pod's service
// (ServiceOf), into the simulator's dependency model, so the policy's
// co-location and latency features see the site's real call graph
// (docs/edge-plugin.md, "Service dependencies").
const (
	// LabelService names the service a pod is a replica of; it takes
	// precedence over app.kubernetes.io/name and app (ServiceOf).
	LabelService = "edgesched.io/service"
	// DefaultDependenciesConfigMapName is the ConfigMap the site leader
	// writes the graph into, in the site's namespace.
	DefaultDependenciesConfigMapName = "edgesched-dependencies"
	// DependenciesConfigMapKey is the key of the graph in its ConfigMap's
	// data.
	DependenciesConfigMapKey = "dependencies.json"

	// DependencyGraphVersion is the format version Encode writes.
	DependencyGraphVersion = 1
	// MaxDependencyGraphBytes bounds an encoded graph (a ConfigMap holds
	// at most 1 MiB).
	MaxDependencyGraphBytes = 1 << 20
	// MaxDependencyEdges bounds the edges of a graph.
	MaxDependencyEdges = 4096
	// MaxServiceName bounds a service's name (a label value is at most
	// 63 bytes; a controller's name at most 253).
	MaxServiceName = 253
	// MaxCallsPerSecond bounds an edge's call rate.
	MaxCallsPerSecond = 1e6
)

// ErrDependencies marks a dependency graph that does not decode or
// validate; the error names the field.
var ErrDependencies = errors.New("kubefmt: bad dependency graph")

// DependencyGraph is the service call graph (format version 1, JSON).
type DependencyGraph struct {
	Version int `json:"version"`
	// Updated is when the graph was computed (informational).
	Updated time.Time `json:"updated,omitzero"`
	// Window is the span of measurements the rates average over
	// (informational, e.g. "10m0s").
	Window string           `json:"window,omitempty"`
	Edges  []DependencyEdge `json:"edges"`
}

// DependencyEdge is one service calling another at a mean rate.
type DependencyEdge struct {
	From           string  `json:"from"`
	To             string  `json:"to"`
	CallsPerSecond float64 `json:"callsPerSecond"`
}

// Validate checks the version, the bounds, the names, the rates (finite,
// positive, at most MaxCallsPerSecond) and that no (from, to) pair
// repeats.
func (g *DependencyGraph) Validate() error {
	if g.Version != DependencyGraphVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrDependencies, g.Version, DependencyGraphVersion)
	}
	if len(g.Edges) > MaxDependencyEdges {
		return fmt.Errorf("%w: %d edges, at most %d", ErrDependencies, len(g.Edges), MaxDependencyEdges)
	}
	seen := make(map[[2]string]bool, len(g.Edges))
	for i, e := range g.Edges {
		for _, n := range []struct{ field, v string }{{"from", e.From}, {"to", e.To}} {
			if err := validName("service", n.v); err != nil {
				return fmt.Errorf("%w: edges[%d].%s: %v", ErrDependencies, i, n.field, err)
			}
		}
		if r := e.CallsPerSecond; math.IsNaN(r) || r <= 0 || r > MaxCallsPerSecond {
			return fmt.Errorf("%w: edges[%d] (%s -> %s): callsPerSecond %v, want (0, %g]", ErrDependencies, i, e.From, e.To, r, float64(MaxCallsPerSecond))
		}
		k := [2]string{e.From, e.To}
		if seen[k] {
			return fmt.Errorf("%w: edges[%d]: %s -> %s given twice", ErrDependencies, i, e.From, e.To)
		}
		seen[k] = true
	}
	return nil
}

// validName checks a name of the given kind (service, zone, carbon
// zone): non-empty, at most MaxServiceName bytes, no spaces, control or
// invalid characters.
func validName(kind, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty %s name", kind)
	case len(s) > MaxServiceName:
		return fmt.Errorf("%s name of %d bytes, at most %d", kind, len(s), MaxServiceName)
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return fmt.Errorf("%s name %q has spaces, control or invalid characters", kind, s)
	}
	return nil
}

// Encode validates g and writes it as JSON with its edges sorted by
// (from, to), so the same graph always encodes to the same bytes.
func (g *DependencyGraph) Encode() ([]byte, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	c := *g
	c.Edges = slices.Clone(g.Edges)
	slices.SortFunc(c.Edges, func(a, b DependencyEdge) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	if c.Edges == nil {
		c.Edges = []DependencyEdge{}
	}
	return encodeBounded(&c, MaxDependencyGraphBytes, "dependency graph", ErrDependencies)
}

// DecodeDependencyGraph reads and validates an encoded graph: at most
// MaxDependencyGraphBytes, one JSON object whose keys are exactly the
// format's (case-sensitive, none twice, no unknown ones; encoding/json
// alone would fold case and let a repeated key win), nothing after it,
// and whose canonical encoding (Encode) fits MaxDependencyGraphBytes too.
func DecodeDependencyGraph(b []byte) (*DependencyGraph, error) {
	return decodeValid[DependencyGraph](b, MaxDependencyGraphBytes, graphShape, ErrDependencies)
}

// graphShape is the keys of the format's objects.
var graphShape = &jsonShape{fields: map[string]*jsonShape{
	"version": nil, "updated": nil, "window": nil,
	"edges": {elem: &jsonShape{fields: map[string]*jsonShape{"from": nil, "to": nil, "callsPerSecond": nil}}},
}}

// ServiceOf is the service a pod is a replica of: its LabelService,
// app.kubernetes.io/name or app label, else its controller's name (a
// ReplicaSet's without the pod-template-hash suffix, so a Deployment's
// pods share one service across rollouts), else "".
func ServiceOf(p *v1.Pod) string {
	for _, l := range []string{LabelService, "app.kubernetes.io/name", "app"} {
		if v := p.Labels[l]; v != "" {
			return v
		}
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return ""
	}
	if ref.Kind == "ReplicaSet" {
		if h := p.Labels["pod-template-hash"]; h != "" {
			return strings.TrimSuffix(ref.Name, "-"+h)
		}
	}
	return ref.Name
}
