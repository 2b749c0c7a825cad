package policy_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
)

func TestDecisionApply(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name   string
		band   float64
		scores []float64
		keys   []float64
		// want is the rewritten scores: in-band candidates become
		// 1 + (key - kmin) (0.5 for an unusable key), the rest s - best.
		want  []float64
		calls int // key calls: one per in-band candidate
	}{
		// band 0: plain argmax, nothing changes.
		{"off", 0, []float64{1, 5, 3}, []float64{9, 0, 0}, []float64{1, 5, 3}, 0},
		// best 5, band 2: candidates >= 3 are in (5 and 3); keys 0 and 7,
		// kmin 0: 1+0 = 1 and 1+7 = 8; 1 becomes 1-5 = -4.
		{"key reorders the band", 2, []float64{1, 5, 3}, []float64{9, 0, 7}, []float64{-4, 1, 8}, 2},
		// a band wider than the range holds everyone: keys decide, kmin 1:
		// 1+(k-1) = k.
		{"band wider than the range", 10, []float64{1, 5, 3}, []float64{4, 1, 2}, []float64{4, 1, 2}, 3},
		// equal keys stay equal (the caller's tie-break decides); 0 -> -5.
		{"equal keys stay tied", 3, []float64{4, 5, 0}, []float64{2, 2, 9}, []float64{1, 1, -5}, 2},
		// NaN scores never enter the band; best is 5 among the finite.
		{"NaN score stays out", 1, []float64{nan, 5, 4.5}, []float64{100, 0, 1}, []float64{nan, 1, 2}, 2},
		// an unusable key ranks last in the band (0.5).
		{"infinite key ranks last", 1, []float64{5, 4.5, 0}, []float64{math.Inf(1), 3, 0}, []float64{0.5, 1, -5}, 2},
		// a -Inf score is simply out of the band.
		{"minus infinite score", 1, []float64{math.Inf(-1), 4.5, 4}, []float64{9, 1, 2}, []float64{math.Inf(-1), 1, 2}, 2},
		// with +Inf the best is not finite: argmax decides.
		{"infinite score", 1, []float64{math.Inf(1), 4.5}, []float64{0, 1}, []float64{math.Inf(1), 4.5}, 0},
		// an infinite band is clamped to MaxBand (finite results).
		{"infinite band", math.Inf(1), []float64{1, 5}, []float64{3, 1}, []float64{3, 1}, 2},
		// one candidate: nothing to decide.
		{"single", 1, []float64{3}, []float64{0}, []float64{3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := slices.Clone(tc.scores)
			calls := 0
			policy.Decision{Band: tc.band}.Apply(s, make([]float64, len(s)), func(i int) float64 { calls++; return tc.keys[i] })
			for i := range s {
				if !(s[i] == tc.want[i] || math.IsNaN(s[i]) && math.IsNaN(tc.want[i])) {
					t.Fatalf("Apply(%v) = %v, want %v", tc.scores, s, tc.want)
				}
			}
			if calls != tc.calls {
				t.Fatalf("key called %d times, want %d (once per in-band candidate)", calls, tc.calls)
			}
		})
	}
}

// TestDecisionApplyProperties: on random scores, the band's members are
// exactly the candidates within Band of the best, they all rank above the
// others in key order, and the others keep their scores less the best.
func TestDecisionApplyProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7)) // seed 7
	for range 500 {
		n := 2 + r.IntN(40)
		scores, keys := make([]float64, n), make([]float64, n)
		for i := range scores {
			scores[i] = math.Round(r.NormFloat64()*100) / 10
			keys[i] = float64(r.IntN(5))
		}
		band := r.Float64() * 20
		best := slices.Max(scores)
		got := slices.Clone(scores)
		policy.Decision{Band: band}.Apply(got, make([]float64, n), func(i int) float64 { return keys[i] })
		for i := range n {
			in := scores[i] >= best-band
			for j := range n {
				jin := scores[j] >= best-band
				switch {
				case in && !jin && !(got[i] > got[j]):
					t.Fatalf("in-band %d (%v) not above out-of-band %d (%v)", i, got[i], j, got[j])
				case in && jin && (keys[i] < keys[j]) != (got[i] < got[j]):
					t.Fatalf("band order %v/%v does not follow keys %v/%v", got[i], got[j], keys[i], keys[j])
				}
			}
			if !in && got[i] != scores[i]-best {
				t.Fatalf("out-of-band score %v (best %v) changed to %v", scores[i], best, got[i])
			}
		}
	}
}

func TestDemote(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	o, u := true, false
	for _, tc := range []struct {
		name   string
		scores []float64
		over   []bool
		// want: with l and b the least and best finite scores not over
		// and m the best finite over score, over scores s move to
		// l - g - (m - s), a +Inf over one to l - g/2, with the gap
		// g = 1 + 1e-6 max(|l|, |b|); the others stay
		want  []float64
		moved bool
	}{
		// l 1, b 3: g = 1 + 3e-6; 5 (= m) -> 1 - g
		{"best over moves below", []float64{1, 5, 3}, []bool{u, o, u}, []float64{1, -3e-6, 3}, true},
		// l = b = 2: g = 1 + 2e-6; 6 -> 2 - g, 4 -> 2 - g - 2
		{"order kept within the over group", []float64{6, 2, 4}, []bool{o, u, o}, []float64{1 - 2e-6, 2, -1 - 2e-6}, true},
		// 0 is below 3 by far more than 1e-6 of 5: nothing moves
		{"already below", []float64{0, 5, 3}, []bool{o, u, u}, []float64{0, 5, 3}, false},
		// every candidate over (or none): argmax decides as before
		{"all over", []float64{1, 5, 3}, []bool{o, o, o}, []float64{1, 5, 3}, false},
		{"none over", []float64{1, 5, 3}, []bool{u, u, u}, []float64{1, 5, 3}, false},
		// NaN and -Inf stay; l = b = 2: 4 -> 2 - (1 + 2e-6)
		{"NaN and -Inf", []float64{nan, 4, 2, math.Inf(-1)}, []bool{o, o, u, u}, []float64{nan, 1 - 2e-6, 2, math.Inf(-1)}, true},
		// l = b = 2, m 3: 3 -> 2 - g; +Inf -> 2 - g/2
		{"+Inf over", []float64{inf, 3, 2}, []bool{o, o, u}, []float64{1.5 - 1e-6, 1 - 2e-6, 2}, true},
		// l 2, b 4: +Inf -> 2 - (1 + 4e-6)/2
		{"+Inf alone over", []float64{inf, 2, 4}, []bool{o, u, u}, []float64{1.5 - 2e-6, 2, 4}, true},
		// no usable score without over: nothing to rank above
		{"no usable score under", []float64{3, nan}, []bool{o, u}, []float64{3, nan}, false},
		// +Inf without over stays above all; the over +Inf moves below 2
		// (l = b = 2, g = 1 + 2e-6: 2 - g/2)
		{"+Inf under wins", []float64{inf, inf, 2}, []bool{u, o, u}, []float64{inf, 1.5 - 1e-6, 2}, true},
		// +Inf is the only usable score without over: the over +Inf that
		// could tie it moves to the largest finite value
		{"+Inf the only one under", []float64{inf, inf, 2}, []bool{u, o, o}, []float64{inf, math.MaxFloat64, 2}, true},
		// below by less than 1e-6 of the scores: moved clear of ties;
		// g = 1 + 1e-5: 10 - 1e-7 (= m) -> 10 - g
		{"near tie moves", []float64{10, 10 - 1e-7}, []bool{u, o}, []float64{10, 9 - 1e-5}, true},
		// large scores: g = 1 + 2e-6 * 1e9 = 2001, far above the
		// simulator's tie tolerance there (1e-9 * 2e9 = 2)
		{"large scores", []float64{3e9, 2e9}, []bool{o, u}, []float64{2e9 - 2001, 2e9}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := slices.Clone(tc.scores)
			moved := policy.Demote(s, tc.over)
			for i := range s {
				same := s[i] == tc.want[i] || math.IsNaN(s[i]) && math.IsNaN(tc.want[i]) ||
					!math.IsInf(s[i], 0) && math.Abs(s[i]-tc.want[i]) <= 1e-9*max(1, math.Abs(tc.want[i]))
				if !same {
					t.Fatalf("Demote(%v, %v) = %v, want %v", tc.scores, tc.over, s, tc.want)
				}
			}
			if moved != tc.moved {
				t.Fatalf("Demote reported moved = %v, want %v", moved, tc.moved)
			}
		})
	}
}

// TestDemoteProperties: on random scores (some NaN, +Inf or -Inf), after
// Demote every usable candidate not over (finite or +Inf) ranks above
// every over candidate that is not NaN or -Inf, when one is usable; the
// scores not over are unchanged; and each group keeps its order.
func TestDemoteProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11)) // seed 11
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for range 2000 {
		n := 2 + r.IntN(30)
		scores, over := make([]float64, n), make([]bool, n)
		for i := range scores {
			scores[i], over[i] = r.NormFloat64()*10, r.IntN(3) == 0
			if r.IntN(25) == 0 {
				scores[i] = special[r.IntN(len(special))]
			}
			if r.IntN(10) == 0 && i > 0 {
				scores[i] = scores[i-1] // ties
			}
		}
		got := slices.Clone(scores)
		policy.Demote(got, over)
		usable := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, -1) }
		anyUnder := false
		for i := range n {
			anyUnder = anyUnder || !over[i] && usable(scores[i])
		}
		for i := range n {
			if !over[i] && !(got[i] == scores[i] || math.IsNaN(got[i]) && math.IsNaN(scores[i])) {
				t.Fatalf("candidate %d not over changed: %v -> %v", i, scores[i], got[i])
			}
			for j := range n {
				if !usable(scores[i]) || !usable(scores[j]) {
					continue
				}
				switch {
				case over[i] == over[j] && (scores[i] < scores[j]) != (got[i] < got[j]):
					t.Fatalf("order changed within a group: %v -> %v (over %v)", scores, got, over)
				case anyUnder && !over[i] && over[j] && !(got[i] > got[j]):
					t.Fatalf("over candidate %d (%v) not below candidate %d (%v): %v -> %v (over %v)", j, got[j], i, got[i], scores, got, over)
				}
			}
		}
	}
}

// TestOverCap: the cap compares the requests after placement with the
// cap's share of the node in integers, so a node exactly at the cap is
// not over at any size (0.7 x 11,000 is 7,699.999... in float64).
func TestOverCap(t *testing.T) {
	for _, tc := range []struct {
		cap                  float64
		requested, pod, node int64
		want                 bool
	}{
		{0.8, 6000, 1000, 8000, true},   // 7,000 > 6,400
		{0.8, 5400, 1000, 8000, false},  // 6,400: at the cap
		{0.8, 5401, 1000, 8000, true},   // 6,401
		{0.7, 6700, 1000, 11000, false}, // 7,700: at the cap exactly
		{0.7, 6701, 1000, 11000, true},
		{1, 8000, 0, 8000, false}, // full, not above
		{1, 8000, 1, 8000, true},
		{0.8, 0, 0, 0, false}, // a node without CPU: 0 > 0 is false
	} {
		if got := policy.OverCap(tc.cap, tc.requested, tc.pod, tc.node); got != tc.want {
			t.Errorf("OverCap(%v, %d, %d, %d) = %v, want %v", tc.cap, tc.requested, tc.pod, tc.node, got, tc.want)
		}
	}
}

func TestDecisionValidate(t *testing.T) {
	for _, tc := range []struct {
		band float64
		ok   bool
	}{{0, true}, {4, true}, {policy.MaxBand, true}, {-1, false}, {math.NaN(), false}, {math.Inf(1), false}, {policy.MaxBand + 1, false}} {
		for _, d := range []policy.Decision{{Band: tc.band}, {Band: 4, WholeGPUBand: tc.band}} {
			err := d.Validate()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, policy.ErrDecision) {
				t.Fatalf("%+v: %v", d, err)
			}
		}
	}
	// the CPU cap: a share in [0, 1], never beside a band
	for _, tc := range []struct {
		d  policy.Decision
		ok bool
	}{
		{policy.Decision{CPUCap: 0.8}, true},
		{policy.Decision{CPUCap: 1}, true},
		{policy.Decision{CPUCap: 0.8, PressureWeight: 10}, false}, // the weight orders a band
		{policy.Decision{CPUCap: -0.1}, false},
		{policy.Decision{CPUCap: 1.5}, false},
		{policy.Decision{CPUCap: math.NaN()}, false},
		{policy.Decision{CPUCap: 0.8, Band: 6}, false},
		{policy.Decision{CPUCap: 0.8, WholeGPUBand: 8}, false},
		// the busy cap alike, alone or beside the CPU cap
		{policy.Decision{BusyCap: 0.9}, true},
		{policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, true},
		{policy.Decision{BusyCap: 1.01}, false},
		{policy.Decision{BusyCap: -0.5}, false},
		{policy.Decision{BusyCap: math.NaN()}, false},
		{policy.Decision{BusyCap: 0.9, Band: 4}, false},
		{policy.Decision{BusyCap: 0.9, PressureWeight: 1}, false},
		// the strand weight: in [0, MaxPressureWeight], with a band only
		{policy.Decision{Band: 6, StrandWeight: 20}, true},
		{policy.Decision{Band: 6, StrandWeight: policy.MaxPressureWeight}, true},
		{policy.Decision{Band: 6, StrandWeight: -1}, false},
		{policy.Decision{Band: 6, StrandWeight: math.NaN()}, false},
		{policy.Decision{Band: 6, StrandWeight: math.Inf(1)}, false},
		{policy.Decision{CPUCap: 0.8, StrandWeight: 20}, false},
	} {
		err := tc.d.Validate()
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, policy.ErrDecision) {
			t.Fatalf("%+v: %v", tc.d, err)
		}
	}
}

// wideBandCheck runs the learned policy and checks every decision against
// a reference policy's scores of the same candidates (FGD, or the teacher
// whose key the rule uses).
type wideBandCheck struct {
	*policy.Learned
	ref       sim.Policy
	buf       []float64
	decisions int
	worst     float64 // largest reference score given up by the learned choice
}

func (c *wideBandCheck) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	c.Learned.Score(st, p, nodes, scores)
	c.buf = slices.Grow(c.buf[:0], len(nodes))[:len(nodes)]
	c.ref.Score(st, p, nodes, c.buf)
	pick := 0
	for i := range scores {
		if scores[i] > scores[pick] {
			pick = i
		}
	}
	c.decisions++
	c.worst = max(c.worst, slices.Max(c.buf)-c.buf[pick])
}

// TestLearnedWideBandIsFGD: a band wider than any score range holds every
// candidate, so the learned policy's choice is always a node FGD scores
// best (the key is FGD's score); without the band the random network
// chooses otherwise. With the pressure and strand weights the key is
// fgd-strand's score, so the choice is one fgd-strand scores best (on
// gpuspec10, where pods name GPU models and the pressure term moves
// choices too).
func TestLearnedWideBandIsFGD(t *testing.T) {
	cfg := engine.DefaultRunConfig(engine.Inflate)
	cfg.Seed, cfg.InflateTarget = 5, 0.3
	strand := func(env *sim.Env) sim.Policy { return baseline.NewFGDStrand(env, 0, 20) }
	fgd := func(env *sim.Env) sim.Policy { return baseline.NewFGD(env) }
	for _, tc := range []struct {
		name   string
		pods   string
		d      policy.Decision
		ref    func(*sim.Env) sim.Policy
		agrees bool
	}{
		{"wide band", openb.Default, policy.Decision{Band: policy.MaxBand}, fgd, true},
		{"no band", openb.Default, policy.Decision{}, fgd, false},
		{"wide band with fgd-strand's weights", openb.GPUSpec10, policy.Decision{Band: policy.MaxBand, PressureWeight: baseline.DefaultPressureWeight, StrandWeight: 20}, strand, true},
		// FGD's key alone gives up some of fgd-strand's score
		{"wide band against fgd-strand", openb.GPUSpec10, policy.Decision{Band: policy.MaxBand}, strand, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+tc.pods)
			if err != nil {
				t.Fatal(err)
			}
			m := randomModel(t, 3)
			m.Decision = tc.d
			var c *wideBandCheck
			f := sim.Factory{Name: "check", New: func(env *sim.Env) (sim.Policy, error) {
				l, err := nn.NewLearned("learned", m, env)
				c = &wideBandCheck{Learned: l, ref: tc.ref(env)}
				return c, err
			}}
			if _, err := engine.Run(context.Background(), env, f, cfg); err != nil {
				t.Fatal(err)
			}
			// With the band the choice is one of the reference's best nodes,
			// exactly: the key is its own score, so nothing is given up.
			t.Logf("%d decisions, largest reference score given up %.3g", c.decisions, c.worst)
			if c.decisions < 1000 || (c.worst == 0) != tc.agrees {
				t.Fatalf("%d decisions, the learned choice gave up up to %v of the reference's best score (want none: %v)", c.decisions, c.worst, tc.agrees)
			}
		})
	}
}

// dependentCheck splits every decision of a banded learned policy by
// whether the pod has a dependency neighbour placed, and checks that the
// rule left those pods' network scores alone and ordered the others.
type dependentCheck struct {
	*policy.Learned
	env       *sim.Env
	net       []float64
	kept      int // decisions of pods with a placed neighbour
	reordered int // decisions of the others where the rule moved a score
	t         *testing.T
}

func (c *dependentCheck) Score(st *sim.State, p *sim.Pod, nodes []int32, scores []float64) {
	c.Learned.NetworkScores(st, p, nodes, scores)
	c.net = append(c.net[:0], scores...)
	c.Learned.Decide(st, p, nodes, scores)
	placed := false
	for _, e := range c.env.Edges {
		if e.Rate > 0 && (e.From == int32(p.Service) && st.ServiceCount(int(e.To)) > 0 || e.To == int32(p.Service) && st.ServiceCount(int(e.From)) > 0) {
			placed = true
		}
	}
	switch {
	case placed && !slices.Equal(scores, c.net):
		c.t.Errorf("pod of service %d with a placed neighbour: the rule changed its scores", p.Service)
	case placed:
		c.kept++
	case len(nodes) > 1 && !slices.Equal(scores, c.net):
		c.reordered++
	}
}

// TestDecideLeavesDependentPods: on a scenario with a dependency graph,
// a wide band orders the decisions of pods without placed neighbours by
// FGD and leaves the others to the network (FGD does not see
// dependencies).
func TestDecideLeavesDependentPods(t *testing.T) {
	l, err := scenario.Load("builtin:retail-fleet")
	if err != nil {
		t.Fatal(err)
	}
	env, err := sage.NewEnv(l.Cluster, l.Workload)
	if err != nil {
		t.Fatal(err)
	}
	m := randomModel(t, 9)
	m.Decision = policy.Decision{Band: policy.MaxBand}
	var c *dependentCheck
	f := sim.Factory{Name: "check", New: func(env *sim.Env) (sim.Policy, error) {
		lp, err := nn.NewLearned("learned", m, env)
		c = &dependentCheck{Learned: lp, env: env, t: t}
		return c, err
	}}
	if _, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Replay)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d decisions left to the network, %d reordered by the band", c.kept, c.reordered)
	if c.kept == 0 || c.reordered == 0 {
		t.Fatalf("kept %d, reordered %d: the scenario must exercise both", c.kept, c.reordered)
	}
}

// TestDecisionFor: the whole-GPU band applies to pods asking for whole
// devices only; without it every pod gets Band.
func TestDecisionFor(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gpus       int32
		milli      int64
		both, only float64 // the band For picks from {4, 8} and from {4, 0}
	}{
		{"cpu only", 0, 0, 4, 4},
		{"gpu share", 1, 500, 4, 4},
		{"one whole gpu", 1, sim.MilliGPU, 8, 4},
		{"four whole gpus", 4, sim.MilliGPU, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &sim.Pod{GPUs: tc.gpus, GPUMilli: tc.milli}
			if got := (policy.Decision{Band: 4, WholeGPUBand: 8}).For(p); got != (policy.Decision{Band: tc.both}) {
				t.Fatalf("with a whole-GPU band: %+v, want band %v", got, tc.both)
			}
			if got := (policy.Decision{Band: 4}).For(p); got != (policy.Decision{Band: tc.only}) {
				t.Fatalf("without: %+v, want band %v", got, tc.only)
			}
			if got := (policy.Decision{CPUCap: 0.8, BusyCap: 0.9, PressureWeight: 2}).For(p); got != (policy.Decision{CPUCap: 0.8, BusyCap: 0.9, PressureWeight: 2}) {
				t.Fatalf("caps: %+v, want them kept for every pod", got)
			}
			if got := (policy.Decision{Band: 4, WholeGPUBand: 8, PressureWeight: 10, StrandWeight: 20}).For(p); got != (policy.Decision{Band: tc.both, PressureWeight: 10, StrandWeight: 20}) {
				t.Fatalf("weights: %+v, want them kept for every pod", got)
			}
		})
	}
}

// TestDecideCapsCPU: with a CPU cap, the node on which the pod would
// bring the CPU requests above the cap ranks below the one where it
// would not, whatever the network prefers; at the cap exactly it is not
// over (the cap is "above"); without a cap the network's order stands.
func TestDecideCapsCPU(t *testing.T) {
	spec := func(name string) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: 8000, Memory: 16 << 10, Arch: sim.ArchAMD64, Zone: "z"}
	}
	cluster := &sim.Cluster{Name: "two", Zones: []sim.Zone{{Name: "z"}}, Nodes: []sim.NodeSpec{spec("busy"), spec("free")}}
	pods := []sim.PodSpec{{Name: "filler", CPU: 6000, Memory: 512}, {Name: "small", CPU: 400, Memory: 512}, {Name: "web", CPU: 1000, Memory: 512}}
	env, err := sim.NewEnv(cluster, &sim.Workload{Name: "three", Pods: pods}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		cap   float64
		small bool // also place the 400m pod on "busy"
		want  int  // the node that wins
	}{
		// busy: 6000 + 1000 = 7000 of 8000 = 0.875 > 0.8: the free node wins
		{"over the cap", 0.8, false, 1},
		// 0.875 <= 0.9: the network's choice (busy) stands
		{"under the cap", 0.9, false, 0},
		// 6000 + 400 + 1000 = 7400 = 0.925 > 0.9
		{"over a higher cap", 0.9, true, 1},
		// 7000 / 8000 = 0.875 exactly: not above
		{"at the cap", 0.875, false, 0},
		{"no cap", 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sim.NewState(env)
			placed := env.Pods[:1]
			if tc.small {
				placed = env.Pods[:2]
			}
			for _, p := range placed { // on "busy"
				id, err := st.AddPod(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Bind(id, 0, nil); err != nil {
					t.Fatal(err)
				}
			}
			id, err := st.AddPod(env.Pods[2])
			if err != nil {
				t.Fatal(err)
			}
			scores := []float64{5, 1} // the network prefers the busy node
			policy.NewExtractor(env).Decide(policy.Decision{CPUCap: tc.cap}, st, &st.Pods[id], []int32{0, 1}, scores)
			got := 0
			if scores[1] > scores[0] {
				got = 1
			}
			if got != tc.want {
				t.Fatalf("scores %v: node %d wins, want %d", scores, got, tc.want)
			}
		})
	}
}

// TestBusy: a node is busy from the step on which the cap falls (18 of
// 20 for 0.9, whatever 0.9's binary rounding) or the next step up.
func TestBusy(t *testing.T) {
	for _, tc := range []struct {
		share float64
		step  uint64
		want  bool
	}{
		{0.9, 18, true},   // 18/20 = 0.9: at the cap
		{0.9, 17, false},  // 0.85
		{0.9, 20, true},   // fully busy
		{0.91, 18, false}, // between steps: the next one up
		{0.91, 19, true},
		{0.05, 1, true},
		{0.05, 0, false},
		{1, 19, false},
		{1, 20, true},
	} {
		if got := policy.Busy(tc.share, tc.step); got != tc.want {
			t.Errorf("Busy(%v, %d) = %v, want %v", tc.share, tc.step, got, tc.want)
		}
	}
}

// TestDecideBusyCap: with a busy cap, a node measured at or above it ranks
// below one that is not, whatever the network prefers, with equal
// requests; a node measured below it keeps the network's order; with
// both caps, a node over the CPU cap ranks below a busy one.
func TestDecideBusyCap(t *testing.T) {
	spec := func(name string) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: 8000, Memory: 16 << 10, Arch: sim.ArchARM64, Zone: "z"}
	}
	cluster := &sim.Cluster{Name: "two", Zones: []sim.Zone{{Name: "z"}}, Nodes: []sim.NodeSpec{spec("hot"), spec("cool")}}
	pods := []sim.PodSpec{{Name: "filler", CPU: 7000, Memory: 512}, {Name: "web", CPU: 500, Memory: 512}}
	env, err := sim.NewEnv(cluster, &sim.Workload{Name: "two-pods", Pods: pods}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		hot    float64 // the hot node's measured CPU share (the cool one: 0.15)
		d      policy.Decision
		filler bool // place the 7000m pod on "cool" (7500/8000 > 0.8 there)
		cool   bool // the network prefers the cool node (else the hot one)
		want   int  // the node that wins
	}{
		{"busy", 0.95, policy.Decision{BusyCap: 0.9}, false, false, 1},
		// 0.876 rounds to the step 0.9 (18 of 20): busy
		{"busy by its step", 0.876, policy.Decision{BusyCap: 0.9}, false, false, 1},
		// 0.87 rounds to 0.85: not busy, the network's choice stands
		{"below the cap", 0.87, policy.Decision{BusyCap: 0.9}, false, false, 0},
		{"no busy cap", 0.95, policy.Decision{CPUCap: 0.8}, false, false, 0},
		// the tiers: a node over the CPU cap ranks below a busy one,
		// whichever the network prefers
		{"cool over the CPU cap, hot busy", 0.95, policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, true, false, 0},
		{"cool over the CPU cap and preferred, hot busy", 0.95, policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, true, true, 0},
		{"cool over the CPU cap", 0.5, policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, true, false, 0},
		{"hot busy", 0.95, policy.Decision{CPUCap: 0.8, BusyCap: 0.9}, false, false, 1},
		// a busy cap alone: the cool node over 0.8 by requests is not busy
		{"busy cap alone, cool packed", 0.95, policy.Decision{BusyCap: 0.9}, true, false, 1},
		// both over a CPU cap of 0.05 (500 / 8000 > 0.05): the busy cap
		// orders that side of it
		{"both over the CPU cap", 0.95, policy.Decision{CPUCap: 0.05, BusyCap: 0.9}, false, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sim.NewState(env)
			lm := st.LoadModel
			cool, hot := lm.FromMeasured(0.15, 0.4, 0.5, 40, 0), lm.FromMeasured(tc.hot, 0.4, 0.5, 40, 0)
			st.SetMeasured(0, &hot)
			st.SetMeasured(1, &cool)
			if tc.filler {
				id, err := st.AddPod(env.Pods[0])
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Bind(id, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			id, err := st.AddPod(env.Pods[1])
			if err != nil {
				t.Fatal(err)
			}
			x := policy.NewExtractor(env)
			x.BeginPod(st, &st.Pods[id])
			scores := []float64{5, 1} // the network prefers the hot node
			if tc.cool {
				scores = []float64{1, 5}
			}
			x.Decide(tc.d, st, &st.Pods[id], []int32{0, 1}, scores)
			got := 0
			if scores[1] > scores[0] {
				got = 1
			}
			if got != tc.want {
				t.Fatalf("scores %v: node %d wins, want %d", scores, got, tc.want)
			}
		})
	}
}

// TestDecideStrandWeight: a CPU-only pod between two GPU nodes that FGD
// holds equal but for its packing key. The target workload's only GPU
// class asks for 8 CPUs per half GPU (16 milli-CPU per milli-GPU), so
// "tight" (16 CPUs, 2 free GPUs) can serve one GPU and the pod's 8 CPUs
// strand another half (1,000 -> 1,500 stranded milli-GPU), while "roomy"
// (64 CPUs) strands nothing. FGD's fragmentation is unchanged on both (the
// class still fits on tight), and its packing key prefers the fuller
// tight; a strand weight of 20 takes 20 x 0.5 = 10 from tight's key.
func TestDecideStrandWeight(t *testing.T) {
	spec := func(name string, cpu int64) sim.NodeSpec {
		return sim.NodeSpec{Name: name, CPU: cpu, Memory: 1 << 20, GPUs: 2, GPUModel: "T4", Arch: sim.ArchAMD64, Zone: "z"}
	}
	cluster := &sim.Cluster{Name: "two", Zones: []sim.Zone{{Name: "z"}}, Nodes: []sim.NodeSpec{spec("tight", 16000), spec("roomy", 64000)}}
	pods := []sim.PodSpec{{Name: "share", CPU: 8000, Memory: 1, GPUs: 1, GPUMilli: 500}, {Name: "batch", CPU: 8000, Memory: 1}}
	env, err := sim.NewEnv(cluster, &sim.Workload{Name: "two", Pods: pods}, sim.EnvOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		d      policy.Decision
		scores []float64 // the network's
		want   int       // the node that wins
	}{
		{"FGD's key alone", policy.Decision{Band: 6}, []float64{5, 5}, 0},
		{"with the strand weight", policy.Decision{Band: 6, StrandWeight: 20}, []float64{5, 5}, 1},
		// a weight of 1 takes 0.5: more than the packing keys' gap (0.75
		// of a node's CPU, scaled below 1)
		{"a small weight", policy.Decision{Band: 6, StrandWeight: 1}, []float64{5, 5}, 1},
		// outside the band the network decides
		{"roomy outside the band", policy.Decision{Band: 6, StrandWeight: 20}, []float64{5, -2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sim.NewState(env)
			id, err := st.AddPod(env.Pods[1])
			if err != nil {
				t.Fatal(err)
			}
			scores := slices.Clone(tc.scores)
			policy.NewExtractor(env).Decide(tc.d, st, &st.Pods[id], []int32{0, 1}, scores)
			got := 0
			if scores[1] > scores[0] {
				got = 1
			}
			if got != tc.want {
				t.Fatalf("scores %v: node %d wins, want %d", scores, got, tc.want)
			}
		})
	}
}
