package sage

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// star is s0 calling s1..s(n-1) at rates 1, 2, ..., with a given CPU.
func star(n int) *Graph {
	g := &Graph{Zones: 3}
	for i := range n {
		g.Services = append(g.Services, Service{Name: fmt.Sprintf("s%d", i), Replicas: 1 + i%3, CPUMilli: int64(100 * (i + 1)), Placed: i % 2, Zones: i % 2})
		if i > 0 {
			g.Calls = append(g.Calls, Call{From: "s0", To: fmt.Sprintf("s%d", i), Rate: float64(i)})
		}
	}
	return g
}

func TestGraphRefused(t *testing.T) {
	ok := func() *Graph { return star(3) }
	cases := []struct {
		name string
		edit func(g *Graph)
		want string
	}{
		{"empty", func(g *Graph) { g.Services, g.Calls = nil, nil }, "no services"},
		{"unnamed", func(g *Graph) { g.Services[1].Name = "" }, "no name"},
		{"twice", func(g *Graph) { g.Services[1].Name = "s0" }, `"s0" listed twice`},
		{"negative replicas", func(g *Graph) { g.Services[0].Replicas = -1 }, "negative"},
		{"unknown service", func(g *Graph) { g.Calls[0].To = "nope" }, "unknown service"},
		{"NaN rate", func(g *Graph) { g.Calls[0].Rate = math.NaN() }, "rate NaN"},
		{"huge rate", func(g *Graph) { g.Calls[0].Rate = 2 * MaxRate }, "rate"},
		{"negative zones", func(g *Graph) { g.Zones = -1 }, "zones"},
		{"too many services", func(g *Graph) { g.Services = make([]Service, MaxServices+1) }, "services, at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := ok()
			c.edit(g)
			_, err := Inputs(g)
			if !errors.Is(err, ErrGraph) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrGraph naming %q", err, c.want)
			}
		})
	}
	if _, err := Inputs(ok()); err != nil {
		t.Fatalf("valid graph refused: %v", err)
	}
}

func TestConfigRefused(t *testing.T) {
	cases := []struct {
		name string
		edit func(c *PretrainConfig)
	}{
		{"layers", func(c *PretrainConfig) { c.Encoder.Layers = 3 }},
		{"fan-outs", func(c *PretrainConfig) { c.Encoder.Fanouts = []int{5} }},
		{"fan-out 0", func(c *PretrainConfig) { c.Encoder.Fanouts[1] = 0 }},
		{"dim", func(c *PretrainConfig) { c.Encoder.Dim = 0 }},
		{"hidden", func(c *PretrainConfig) { c.Encoder.Hidden = 1 << 20 }},
		{"epochs", func(c *PretrainConfig) { c.Epochs = 0 }},
		{"lr", func(c *PretrainConfig) { c.LR = math.NaN() }},
		{"negatives", func(c *PretrainConfig) { c.Negatives = 0 }},
		{"scale", func(c *PretrainConfig) { c.Scale = -1 }},
		{"frozen dot product", func(c *PretrainConfig) { c.Bilinear, c.FrozenEncoder = false, true }},
	}
	for _, c := range cases {
		cfg := DefaultPretrainConfig()
		cfg.Encoder.Fanouts = append([]int(nil), cfg.Encoder.Fanouts...)
		c.edit(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
	def := DefaultPretrainConfig()
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestInputs checks a star's inputs against values worked out by hand.
func TestInputs(t *testing.T) {
	x, err := Inputs(star(4)) // s0 calls s1, s2, s3 at 1, 2, 3 per second
	if err != nil {
		t.Fatal(err)
	}
	row := func(v int) []float32 { return x[v*NumInputs : (v+1)*NumInputs] }
	l := func(v float64) float32 { return float32(math.Log1p(v)) }
	want := map[int][]float32{
		// s0: 6 calls out, 3 neighbours, 1 replica, 100m, entry, not a
		// leaf, the busiest (6 of 6), no replica placed
		0: {0, l(6) / 8, l(3) / 4, l(1) / 2, 0.1 / 4, 1, 0, 1, 0, 0},
		// s3: 3 calls in, one neighbour, 1 replica (3%3 = 0 read as 1),
		// 400m, a leaf, 3 of 6, placed 1 of 1 in one zone of 3
		3: {l(3) / 8, 0, l(1) / 4, l(1) / 2, 0.4 / 4, 0, 1, 0.5, 1, float32(1) / 3},
	}
	for v, w := range want {
		for j := range w {
			if math.Abs(float64(row(v)[j]-w[j])) > 1e-6 {
				t.Errorf("service s%d input %d (%s) = %v, want %v", v, j, InputNames[j], row(v)[j], w[j])
			}
		}
	}
}

// TestAggregators checks the neighbourhood weights: a service with few
// neighbours averages them by call rate; a busier one samples in
// proportion to the rates.
func TestAggregators(t *testing.T) {
	c, err := compile(star(4))
	if err != nil {
		t.Fatal(err)
	}
	ms := c.aggregators([]int{3, 1000}, 7)
	// layer 1, fan-out 3: s0 keeps s1, s2, s3 at 1/6, 2/6, 3/6
	m := ms[0]
	if got := m.Idx[m.Off[0]:m.Off[1]]; fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("s0's neighbours %v", got)
	}
	for i, w := range []float64{1. / 6, 2. / 6, 3. / 6} {
		if math.Abs(float64(m.W[int(m.Off[0])+i])-w) > 1e-6 {
			t.Errorf("s0's weight %d = %v, want %v", i, m.W[int(m.Off[0])+i], w)
		}
	}
	// a leaf's one neighbour weighs 1
	if m.Off[2]-m.Off[1] != 1 || m.W[m.Off[1]] != 1 || m.Idx[m.Off[1]] != 0 {
		t.Errorf("s1's neighbourhood %v %v", m.Idx[m.Off[1]:m.Off[2]], m.W[m.Off[1]:m.Off[2]])
	}
	// fan-out 2 < 3 neighbours: two draws, weights in halves summing to 1
	small := c.aggregators([]int{2}, 7)[0]
	var sum float32
	for _, w := range small.W[small.Off[0]:small.Off[1]] {
		sum += w
		if w != 0.5 && w != 1 {
			t.Errorf("a weight of %v from two draws", w)
		}
	}
	if sum != 1 || small.Off[1]-small.Off[0] > 2 {
		t.Errorf("2 draws for s0: %v %v", small.Idx[small.Off[0]:small.Off[1]], small.W[small.Off[0]:small.Off[1]])
	}
	// draws follow the rates: 6,000 draws among rates 1, 2, 3 land near
	// 1/6, 2/6, 3/6 (binomial standard deviation at most 0.0065; 0.03 is
	// over four of them)
	rng := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, 3)
	for range 6000 {
		counts[draw(rng, c.nbr[0], 6)]++
	}
	for i, w := range []float64{1. / 6, 2. / 6, 3. / 6} {
		if got := float64(counts[i]) / 6000; math.Abs(got-w) > 0.03 {
			t.Errorf("neighbour %d drawn %.3f of the time, want %.3f", i+1, got, w)
		}
	}
}

// shuffled is g with its services and calls in another order and the
// calls between two services split in two (rates adding up).
func shuffled(g *Graph, seed uint64) *Graph {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := &Graph{Zones: g.Zones, Services: append([]Service(nil), g.Services...)}
	for _, c := range g.Calls {
		out.Calls = append(out.Calls, Call{c.From, c.To, c.Rate / 4}, Call{c.From, c.To, c.Rate * 3 / 4})
	}
	rng.Shuffle(len(out.Services), func(i, j int) { out.Services[i], out.Services[j] = out.Services[j], out.Services[i] })
	rng.Shuffle(len(out.Calls), func(i, j int) { out.Calls[i], out.Calls[j] = out.Calls[j], out.Calls[i] })
	return out
}

// TestEmbedOrderInvariant: the leader and the simulator list a graph in
// different orders; each service must get the same embedding, bit for
// bit, also where neighbourhoods are sampled (fan-outs 2 and 2 on a
// 12-service hub graph), and a different seed must change sampled ones.
func TestEmbedOrderInvariant(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Fanouts = []int{2, 2}
	enc, err := New(cfg, rand.New(rand.NewPCG(4, 4)))
	if err != nil {
		t.Fatal(err)
	}
	g := star(12)
	// the leaves also call each other in a ring, so they are sampled too
	for i := 1; i < 12; i++ {
		g.Calls = append(g.Calls, Call{From: fmt.Sprintf("s%d", i), To: fmt.Sprintf("s%d", i%11+1), Rate: 0.5})
	}
	a, err := enc.Embed(g)
	if err != nil {
		t.Fatal(err)
	}
	b, err := enc.Embed(shuffled(g, 9))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range a.Names {
		if fmt.Sprint(a.Of(n)) != fmt.Sprint(b.Of(n)) {
			t.Fatalf("%s: %v in one order, %v in another", n, a.Of(n), b.Of(n))
		}
	}
	enc.Seed++
	c, err := enc.Embed(g)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a.Values) == fmt.Sprint(c.Values) {
		t.Fatal("another sampling seed gave the same embeddings")
	}
}

// TestEmbedInductive: a service's embedding depends on its neighbourhood
// within two hops only: adding an unconnected app (less busy, so the
// busiest service stays the same) changes no embedding of the first.
func TestEmbedInductive(t *testing.T) {
	enc, err := New(DefaultConfig(), rand.New(rand.NewPCG(5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	g := star(6)
	a, err := enc.Embed(g)
	if err != nil {
		t.Fatal(err)
	}
	a = &Embeddings{Names: a.Names, Dim: a.Dim, Values: append([]float32(nil), a.Values...)}
	g.Services = append(g.Services, Service{Name: "x0"}, Service{Name: "x1"}, Service{Name: "x2"})
	g.Calls = append(g.Calls, Call{"x0", "x1", 0.5}, Call{"x1", "x2", 0.5})
	b, err := enc.Embed(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range a.Names {
		if fmt.Sprint(a.Of(n)) != fmt.Sprint(b.Of(n)) {
			t.Fatalf("%s changed when an unconnected app was added", n)
		}
	}
	if b.Of("x1") == nil || b.Of("nope") != nil {
		t.Fatal("Of")
	}
}

// TestEmbedConcurrent: one encoder (Default's is shared by every caller)
// serves concurrent Embed calls with the results of serial ones.
func TestEmbedConcurrent(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	graphs := []*Graph{star(5), star(9), bigGraph(60)}
	want := make([]string, len(graphs))
	for i, g := range graphs {
		m, err := p.Encoder.Embed(g)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = fmt.Sprint(m.Values)
	}
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for k := range 6 {
				i := (w + k) % len(graphs)
				m, err := p.Encoder.Embed(graphs[i])
				if err == nil && fmt.Sprint(m.Values) != want[i] {
					err = fmt.Errorf("graph %d: a concurrent call got other embeddings", i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
