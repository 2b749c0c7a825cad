package sage

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/edgesched/edgesched/sim/scenario"
)

// Limits of a graph.
const (
	MaxServices = 10000
	MaxCalls    = 200000
	// MaxRate bounds a call rate (calls per second).
	MaxRate = 1e9
)

// ErrGraph reports a graph that cannot be embedded.
var ErrGraph = errors.New("sage: invalid graph")

// Service is one node of the call graph.
type Service struct {
	Name string
	// Replicas the service runs (0: unknown, read as 1).
	Replicas int
	// CPUMilli is one replica's CPU request (0: unknown).
	CPUMilli int64
	// Placed replicas and the Zones they span: the placement summary
	// (both 0 before any is placed).
	Placed, Zones int
}

// Call is a directed call edge with its rate.
type Call struct {
	From, To string
	// Rate in calls per second, finite, >= 0.
	Rate float64
}

// Graph is a service call graph. Several calls between the same two
// services (either direction) add up; self-calls are ignored.
type Graph struct {
	Services []Service
	Calls    []Call
	// Zones in the cluster (0: no placement summary).
	Zones int
}

// neighbour is an undirected edge seen from one end: the other end and
// the call rate both ways.
type neighbour struct {
	idx  int32
	rate float64
}

// compiled is a validated graph's adjacency and per-service rates.
type compiled struct {
	g       *Graph
	nbr     [][]neighbour // sorted by the neighbour's name
	in, out []float64
}

// compile validates g and builds its adjacency.
func compile(g *Graph) (*compiled, error) {
	n := len(g.Services)
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: no services", ErrGraph)
	case n > MaxServices:
		return nil, fmt.Errorf("%w: %d services, at most %d", ErrGraph, n, MaxServices)
	case len(g.Calls) > MaxCalls:
		return nil, fmt.Errorf("%w: %d calls, at most %d", ErrGraph, len(g.Calls), MaxCalls)
	case g.Zones < 0:
		return nil, fmt.Errorf("%w: %d zones", ErrGraph, g.Zones)
	}
	idx := make(map[string]int32, n)
	for i, s := range g.Services {
		if s.Name == "" {
			return nil, fmt.Errorf("%w: service %d has no name", ErrGraph, i)
		}
		if _, dup := idx[s.Name]; dup {
			return nil, fmt.Errorf("%w: service %q listed twice", ErrGraph, s.Name)
		}
		if s.Replicas < 0 || s.CPUMilli < 0 || s.Placed < 0 || s.Zones < 0 {
			return nil, fmt.Errorf("%w: service %q: negative replicas, request or placement", ErrGraph, s.Name)
		}
		idx[s.Name] = int32(i)
	}
	c := &compiled{g: g, nbr: make([][]neighbour, n), in: make([]float64, n), out: make([]float64, n)}
	pair := make(map[[2]int32]float64)
	for _, e := range g.Calls {
		a, ok1 := idx[e.From]
		b, ok2 := idx[e.To]
		switch {
		case !ok1 || !ok2:
			return nil, fmt.Errorf("%w: call %s -> %s names an unknown service", ErrGraph, e.From, e.To)
		case !(e.Rate >= 0 && e.Rate <= MaxRate):
			return nil, fmt.Errorf("%w: call %s -> %s: rate %v, want [0, %g]", ErrGraph, e.From, e.To, e.Rate, float64(MaxRate))
		case a == b:
			continue
		}
		c.out[a] += e.Rate
		c.in[b] += e.Rate
		pair[[2]int32{min(a, b), max(a, b)}] += e.Rate
	}
	for p, r := range pair {
		c.nbr[p[0]] = append(c.nbr[p[0]], neighbour{p[1], r})
		c.nbr[p[1]] = append(c.nbr[p[1]], neighbour{p[0], r})
	}
	for v := range c.nbr {
		slices.SortFunc(c.nbr[v], func(x, y neighbour) int { return cmp.Compare(g.Services[x.idx].Name, g.Services[y.idx].Name) })
	}
	return c, nil
}

// NumInputs is the number of node inputs (Inputs).
const NumInputs = 10

// InputNames names the node inputs, in order.
var InputNames = [NumInputs]string{
	"log(1 + calls in per second) / 8",
	"log(1 + calls out per second) / 8",
	"log(1 + neighbours) / 4",
	"log(1 + replicas) / 2",
	"CPU request per replica, cores / 4 (at most 2)",
	"1 for an entry (called by none, calls some)",
	"1 for a leaf (calls none)",
	"calls in and out / the graph's busiest service's",
	"placed replicas / replicas",
	"zones the placed replicas span / the cluster's zones",
}

// inputs returns the node input rows (n x NumInputs).
func (c *compiled) inputs() []float32 {
	g := c.g
	n := len(g.Services)
	var busiest float64
	for v := range n {
		busiest = max(busiest, c.in[v]+c.out[v])
	}
	x := make([]float32, n*NumInputs)
	for v, s := range g.Services {
		row := x[v*NumInputs : (v+1)*NumInputs]
		row[0] = float32(math.Log1p(c.in[v]) / 8)
		row[1] = float32(math.Log1p(c.out[v]) / 8)
		row[2] = float32(math.Log1p(float64(len(c.nbr[v]))) / 4)
		reps := max(s.Replicas, 1)
		row[3] = float32(math.Log1p(float64(reps)) / 2)
		row[4] = float32(min(float64(s.CPUMilli)/1000, 8) / 4)
		row[5] = b2f(c.in[v] == 0 && c.out[v] > 0)
		row[6] = b2f(c.out[v] == 0)
		if busiest > 0 {
			row[7] = float32((c.in[v] + c.out[v]) / busiest)
		}
		row[8] = float32(min(float64(s.Placed)/float64(reps), 1))
		if g.Zones > 0 {
			row[9] = float32(min(float64(s.Zones)/float64(g.Zones), 1))
		}
	}
	return x
}

// Inputs validates g and returns its node input rows (len(g.Services) x
// NumInputs, row-major).
func Inputs(g *Graph) ([]float32, error) {
	c, err := compile(g)
	if err != nil {
		return nil, err
	}
	return c.inputs(), nil
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// FromApp is an app's call graph: its services with their replicas and
// requests, its calls at the app's nominal rates, nothing placed.
func FromApp(a *scenario.App) *Graph {
	g := &Graph{}
	for _, s := range a.Services {
		g.Services = append(g.Services, Service{Name: s.Name, Replicas: s.Replicas, CPUMilli: s.Template.CPUMilli})
	}
	for _, d := range a.Dependencies {
		g.Calls = append(g.Calls, Call{From: d.From, To: d.To, Rate: d.CallsPerSecond})
	}
	return g
}
