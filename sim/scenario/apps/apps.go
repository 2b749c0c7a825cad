// Package apps is the library of service call graphs scenarios place with
// workload.apps: five published microservice benchmarks (Online Boutique,
// DeathStarBench socialNetwork, hotelReservation and mediaMicroservices,
// TrainTicket), each an App document in the scenario format (kind App:
// services with replicas and pod templates, dependencies with call rates;
// docs/scenario.md), learned from the projects' manifests, sources and
// load generators (each file's header says what comes from where), and a
// generator of synthetic graphs of other sizes and shapes.
//
// Roles: online-boutique, social-network and hotel-reservation are for
// training; media-microservices, train-ticket and every synthetic graph
// are held out for evaluation (HeldOut).
//
// The package only produces YAML; sim/scenario decodes it. Everything here
// is safe for concurrent use.
package apps

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed library/*.yaml
var library embed.FS

// Errors.
var (
	ErrUnknown = errors.New("apps: unknown app")
	ErrInvalid = errors.New("apps: invalid synthetic graph")
)

// Names lists the library's apps, sorted.
func Names() []string {
	entries, _ := library.ReadDir("library")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Source returns a library app's YAML.
func Source(name string) ([]byte, error) {
	b, err := library.ReadFile("library/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknown, name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// HeldOut reports whether an app (a library name, or "synthetic") is kept
// for evaluation only: no training configuration may place it.
func HeldOut(name string) bool {
	switch name {
	case "online-boutique", "social-network", "hotel-reservation":
		return false
	}
	return true
}

// Shapes of synthetic graphs.
const (
	// Chain: s0 → s1 → ... → s(n−1), each hop carrying the whole load.
	Chain = "chain"
	// FanOut: s0 calls every other service.
	FanOut = "fanout"
	// Hubs: about n/6 shared services (a cache, an auth, a database...)
	// called by every other one; s0 calls the rest.
	Hubs = "hubs"
	// Tree: each service i > 0 is called by one earlier service, drawn
	// uniformly; the load splits down the tree.
	Tree = "tree"
)

// Shapes lists the synthetic shapes.
func Shapes() []string { return []string{Chain, FanOut, Hubs, Tree} }

// Limits of a synthetic graph.
const (
	MinServices = 2
	MaxServices = 500
)

// Spec describes a synthetic graph. The zero value of Rate means 100.
type Spec struct {
	Shape    string
	Services int
	// Seed draws the sizes, usages, replicas, rates and (tree) the edges.
	Seed uint64
	// Rate is the entry service's request rate per second.
	Rate float64
}

// Validate checks a spec.
func (s *Spec) Validate() error {
	switch {
	case !slices.Contains(Shapes(), s.Shape):
		return fmt.Errorf("%w: shape %q (want %s)", ErrInvalid, s.Shape, strings.Join(Shapes(), ", "))
	case s.Services < MinServices || s.Services > MaxServices:
		return fmt.Errorf("%w: %d services, want %d..%d", ErrInvalid, s.Services, MinServices, MaxServices)
	case !(s.Rate >= 0 && s.Rate <= 1e6):
		return fmt.Errorf("%w: rate %v, want [0, 1e6] (0: 100)", ErrInvalid, s.Rate)
	}
	return nil
}

// Name is the app name a spec produces ("synthetic-fanout-12-s3").
func (s *Spec) Name() string { return fmt.Sprintf("synthetic-%s-%d-s%d", s.Shape, s.Services, s.Seed) }

type outTemplate struct {
	CPUMilli  int64   `yaml:"cpuMilli"`
	MemoryMiB int64   `yaml:"memoryMiB"`
	Usage     float64 `yaml:"usage"`
	MemUsage  float64 `yaml:"memUsage,omitempty"`
}

type outService struct {
	Name     string      `yaml:"name"`
	Replicas int         `yaml:"replicas"`
	Tier     string      `yaml:"tier,omitempty"`
	Template outTemplate `yaml:"template"`
}

type outDep struct {
	From           string  `yaml:"from"`
	To             string  `yaml:"to"`
	CallsPerSecond float64 `yaml:"callsPerSecond"`
}

type outApp struct {
	APIVersion   string       `yaml:"apiVersion"`
	Kind         string       `yaml:"kind"`
	Name         string       `yaml:"name"`
	Description  string       `yaml:"description"`
	Source       string       `yaml:"source"`
	Services     []outService `yaml:"services"`
	Dependencies []outDep     `yaml:"dependencies"`
}

// synthStream separates the synthetic generator's stream from others
// seeded with the same number.
const synthStream = 0x5eed_a995

// Synthetic generates a graph as App YAML. Service i is "s<i>"; requests
// are 50-500 milli-CPU and 64-1024 MiB, usage 0.3-1.8 of the request,
// replicas 1-3, one in four services after s0 a store (tier store,
// memory 1-3x its request), and every edge carries the caller's load times a factor in
// [0.5, 2) (split among children in a tree), all drawn from the seed.
func Synthetic(s Spec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	rate := s.Rate
	if rate == 0 {
		rate = 100
	}
	rng := rand.New(rand.NewPCG(s.Seed, synthStream))
	n := s.Services
	app := outApp{APIVersion: "edgesched.io/v1alpha1", Kind: "App", Name: s.Name(),
		Description: fmt.Sprintf("synthetic %s graph of %d services, %g requests/s at s0 (seed %d)", s.Shape, n, rate, s.Seed),
		Source:      "sim/scenario/apps.Synthetic"}
	cpus := []int64{50, 100, 100, 200, 250, 500}
	mems := []int64{64, 128, 256, 256, 512, 1024}
	for i := range n {
		t := outTemplate{CPUMilli: cpus[rng.IntN(len(cpus))], MemoryMiB: mems[rng.IntN(len(mems))], Usage: round2(0.3 + 1.5*rng.Float64())}
		tier := ""
		if i > 0 && rng.IntN(4) == 0 {
			t.MemUsage = round2(1 + 2*rng.Float64()) // a store or cache: memory beyond its request
			tier = "store"
		}
		app.Services = append(app.Services, outService{Name: fmt.Sprintf("s%d", i), Replicas: 1 + rng.IntN(3), Tier: tier, Template: t})
	}
	factor := func() float64 { return 0.5 + 1.5*rng.Float64() }
	load := make([]float64, n)
	load[0] = rate
	edge := func(a, b int, r float64) {
		r = round2(min(r, 10*rate)) // compounding factors stay bounded
		app.Dependencies = append(app.Dependencies, outDep{From: fmt.Sprintf("s%d", a), To: fmt.Sprintf("s%d", b), CallsPerSecond: r})
		load[b] += r
	}
	switch s.Shape {
	case Chain:
		for i := 1; i < n; i++ {
			edge(i-1, i, load[i-1]*factor())
		}
	case FanOut:
		for i := 1; i < n; i++ {
			edge(0, i, rate*factor())
		}
	case Hubs:
		hubs := max(1, n/6)
		edge(0, 1, rate*factor()/4)
		for i := 1 + hubs; i < n; i++ {
			edge(0, i, rate*factor()/2)
		}
		for i := 1 + hubs; i < n; i++ {
			for h := 1; h <= hubs; h++ {
				if h == 1 || rng.IntN(2) == 0 {
					edge(i, h, load[i]*factor())
				}
			}
		}
	case Tree:
		parent := make([]int, n)
		kids := make([]int, n)
		for i := 1; i < n; i++ {
			parent[i] = rng.IntN(i)
			kids[parent[i]]++
		}
		for i := 1; i < n; i++ {
			p := parent[i]
			edge(p, i, load[p]*factor()/math.Sqrt(float64(kids[p])))
		}
	}
	return yaml.Marshal(&app)
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// Requests sums an app document's CPU requests (milli-CPU over all
// replicas), for sizing an instance with a requests scale.
func Requests(src []byte) (int64, error) {
	var doc struct {
		Services []struct {
			Replicas int `yaml:"replicas"`
			Template struct {
				CPUMilli int64 `yaml:"cpuMilli"`
			} `yaml:"template"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var sum int64
	for _, s := range doc.Services {
		sum += int64(s.Replicas) * s.Template.CPUMilli
	}
	return sum, nil
}
