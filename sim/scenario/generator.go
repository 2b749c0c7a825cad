package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
)

// Generator synthesises arrivals: a Poisson (or evenly spaced) process
// whose rate follows a daily cycle and bursts; each arrival draws a pod
// template from the mix by weight and a lifetime.
type Generator struct {
	// Start and Duration bound the arrivals, in seconds from the trace start.
	Start    Duration `yaml:"start"`
	Duration Duration `yaml:"duration"`
	Arrivals Arrivals `yaml:"arrivals"`
	Diurnal  *Diurnal `yaml:"diurnal"`
	Bursts   []Burst  `yaml:"bursts"`
	Mix      []Mix    `yaml:"mix"`
	pos      pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (g *Generator) UnmarshalYAML(n *yaml.Node) error {
	type raw Generator
	return strict(n, (*raw)(g), &g.pos)
}

// Arrivals is the base arrival process.
type Arrivals struct {
	// Process is "poisson" (default) or "uniform" (evenly spaced).
	Process     string  `yaml:"process"`
	RatePerHour float64 `yaml:"ratePerHour"`
	pos         pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (a *Arrivals) UnmarshalYAML(n *yaml.Node) error {
	type raw Arrivals
	return strict(n, (*raw)(a), &a.pos)
}

// Diurnal multiplies the rate by 1 + Amplitude*cos(2*pi*(hour-PeakHour)/24).
type Diurnal struct {
	Amplitude float64 `yaml:"amplitude"`
	PeakHour  float64 `yaml:"peakHour"`
	pos       pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (d *Diurnal) UnmarshalYAML(n *yaml.Node) error {
	type raw Diurnal
	return strict(n, (*raw)(d), &d.pos)
}

// Burst multiplies the rate during [At, At+Duration).
type Burst struct {
	At         Duration `yaml:"at"`
	Duration   Duration `yaml:"duration"`
	Multiplier float64  `yaml:"multiplier"`
	pos        pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (b *Burst) UnmarshalYAML(n *yaml.Node) error {
	type raw Burst
	return strict(n, (*raw)(b), &b.pos)
}

// Mix is one kind of generated pod.
type Mix struct {
	Name    string  `yaml:"name"`
	Weight  float64 `yaml:"weight"`
	Service string  `yaml:"service"`
	// Lifetime is the mean run time; Fixed makes every pod live exactly
	// that long instead of an exponential draw.
	Lifetime Duration    `yaml:"lifetime"`
	Fixed    bool        `yaml:"fixed"`
	Template PodTemplate `yaml:"template"`
	pos      pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (m *Mix) UnmarshalYAML(n *yaml.Node) error {
	type raw Mix
	return strict(n, (*raw)(m), &m.pos)
}

// Bounds on a generator: start and duration (400 days), bursts and mix
// entries.
const (
	MaxGeneratorSeconds = 400 * 24 * 3600
	MaxBursts           = 1000
	MaxMix              = 1000
)

// burstTimeline is the product of the burst multipliers as a step function:
// mult[i] holds on [edges[i], edges[i+1]).
type burstTimeline struct {
	edges []float64
	mult  []float64
}

func newBurstTimeline(bursts []Burst) burstTimeline {
	var bt burstTimeline
	for _, b := range bursts {
		bt.edges = append(bt.edges, float64(b.At), float64(b.At+b.Duration))
	}
	slices.Sort(bt.edges)
	bt.edges = slices.Compact(bt.edges)
	bt.mult = make([]float64, len(bt.edges))
	for i, e := range bt.edges {
		m := 1.0
		for _, b := range bursts {
			if e >= float64(b.At) && e < float64(b.At+b.Duration) {
				m *= b.Multiplier
			}
		}
		bt.mult[i] = m
	}
	return bt
}

// at returns the multiplier at time t.
func (bt burstTimeline) at(t float64) float64 {
	i, found := slices.BinarySearch(bt.edges, t)
	if !found {
		i--
	}
	if i < 0 {
		return 1
	}
	return bt.mult[i]
}

func (bt burstTimeline) max() float64 {
	m := 1.0
	for _, v := range bt.mult {
		m = max(m, v)
	}
	return m
}

type genPod struct {
	spec  sim.PodSpec
	line  int
	field string
}

// generatorStream is the random stream of the generator under the
// scenario's seed.
const generatorStream = 0x9e3779b97f4a7c15

func (b *builder) generate(g *Generator, seed uint64) ([]genPod, error) {
	const f = "workload.generator"
	a := &g.Arrivals
	switch {
	case g.Duration <= 0 || g.Duration > MaxGeneratorSeconds:
		return nil, errAt(g.pos.at("duration"), f+".duration", sim.ErrInvalid, "must be in (0s, %ds] (400 days)", MaxGeneratorSeconds)
	case g.Start > MaxGeneratorSeconds:
		return nil, errAt(g.pos.at("start"), f+".start", sim.ErrInvalid, "must be at most %ds (400 days)", MaxGeneratorSeconds)
	case a.Process != "" && a.Process != "poisson" && a.Process != "uniform":
		return nil, errAt(a.pos.at("process"), f+".arrivals.process", sim.ErrInvalid, "%q, want poisson or uniform", a.Process)
	case !finite(a.RatePerHour) || a.RatePerHour <= 0:
		return nil, errAt(a.pos.at("ratePerHour"), f+".arrivals.ratePerHour", sim.ErrInvalid, "%v, want > 0", a.RatePerHour)
	case len(g.Mix) == 0:
		return nil, errAt(g.pos.line, f+".mix", sim.ErrInvalid, "needs at least one entry")
	}
	amp, peak := 0.0, 0.0
	if d := g.Diurnal; d != nil {
		if !finite(d.Amplitude) || d.Amplitude < 0 || d.Amplitude > 1 {
			return nil, errAt(d.pos.at("amplitude"), f+".diurnal.amplitude", sim.ErrInvalid, "%v, want 0..1", d.Amplitude)
		}
		if !finite(d.PeakHour) || d.PeakHour < 0 || d.PeakHour >= 24 {
			return nil, errAt(d.pos.at("peakHour"), f+".diurnal.peakHour", sim.ErrInvalid, "%v, want [0, 24)", d.PeakHour)
		}
		amp, peak = d.Amplitude, d.PeakHour
	}
	if len(g.Bursts) > MaxBursts {
		return nil, errAt(g.pos.at("bursts"), f+".bursts", ErrTooLarge, "%d bursts, at most %d", len(g.Bursts), MaxBursts)
	}
	if len(g.Mix) > MaxMix {
		return nil, errAt(g.pos.at("mix"), f+".mix", ErrTooLarge, "%d entries, at most %d", len(g.Mix), MaxMix)
	}
	for i, bu := range g.Bursts {
		if !finite(bu.Multiplier) || bu.Multiplier <= 0 || bu.Multiplier > 1000 {
			return nil, errAt(bu.pos.at("multiplier"), fmt.Sprintf("%s.bursts[%d].multiplier", f, i), sim.ErrInvalid, "%v, want (0, 1000]", bu.Multiplier)
		}
	}
	bursts := newBurstTimeline(g.Bursts)
	maxBurst := bursts.max()
	var totalW float64
	specs := make([]sim.PodSpec, len(g.Mix))
	for i := range g.Mix {
		m := &g.Mix[i]
		mf := fmt.Sprintf("%s.mix[%d]", f, i)
		switch {
		case m.Name == "":
			return nil, errAt(m.pos.line, mf+".name", sim.ErrInvalid, "missing (generated pods are NAME-N)")
		case !finite(m.Weight) || m.Weight <= 0:
			return nil, errAt(m.pos.at("weight"), mf+".weight", sim.ErrInvalid, "%v, want > 0", m.Weight)
		case m.Lifetime <= 0 || m.Lifetime > MaxGeneratorSeconds:
			return nil, errAt(m.pos.at("lifetime"), mf+".lifetime", sim.ErrInvalid, "must be in (0s, %ds] (400 days)", MaxGeneratorSeconds)
		}
		ps, err := b.podSpec(&m.Template, m.Name, mf+".template")
		if err != nil {
			return nil, err
		}
		ps.Service = m.Service
		if m.Service != "" {
			b.services[m.Service] = true
		}
		specs[i] = ps
		totalW += m.Weight
	}
	expected := a.RatePerHour * (1 + amp) * maxBurst * float64(g.Duration) / 3600
	if expected > MaxPods {
		return nil, errAt(a.pos.at("ratePerHour"), f+".arrivals.ratePerHour", ErrTooLarge, "about %.0f arrivals, over %d", expected, MaxPods)
	}
	rate := func(t float64) float64 { // arrivals per second at t
		r := a.RatePerHour / 3600
		if amp > 0 {
			h := math.Mod(t/3600, 24)
			r *= 1 + amp*math.Cos(2*math.Pi*(h-peak)/24)
		}
		return r * bursts.at(t)
	}
	rng := rand.New(rand.NewPCG(seed, generatorStream))
	lambdaMax := a.RatePerHour / 3600 * (1 + amp) * maxBurst
	start, end := float64(g.Start), float64(g.Start+g.Duration)
	var out []genPod
	counts := make([]int, len(g.Mix))
	emit := func(t float64) {
		x := rng.Float64() * totalW
		k := 0
		for k < len(g.Mix)-1 && x >= g.Mix[k].Weight {
			x -= g.Mix[k].Weight
			k++
		}
		m := &g.Mix[k]
		ps := specs[k]
		ps.Name = fmt.Sprintf("%s-%d", m.Name, counts[k])
		b.spread(&ps, m.Template.UsageSpread)
		counts[k]++
		ps.Create = int64(t)
		life := float64(m.Lifetime)
		if !m.Fixed {
			life = rng.ExpFloat64() * life
		}
		// exponential draws are capped at 50 means (e^-50: never in practice)
		ps.Delete = ps.Create + max(1, int64(math.Round(min(life, 50*float64(m.Lifetime)))))
		out = append(out, genPod{spec: ps, line: m.pos.line, field: fmt.Sprintf("%s.mix[%d]", f, k)})
	}
	if a.Process == "uniform" {
		// Evenly spaced in "rate time": an arrival whenever the integral of
		// the rate since the last one reaches 1, integrated in 10 s steps
		// (at most 3.5M steps for the longest generator) and placed inside
		// the step where it falls.
		const dt = 10.0
		acc := 0.0
		for t := start; t < end; t += dt {
			step := min(dt, end-t)
			r := rate(t)
			acc += r * step
			for acc >= 1-1e-9 { // tolerate the float sum's rounding
				acc = max(0, acc-1)
				emit(t + step - acc/r)
			}
		}
		return out, nil
	}
	// Non-homogeneous Poisson process by thinning (Lewis & Shedler).
	for t := start; ; {
		t += rng.ExpFloat64() / lambdaMax
		if t >= end {
			break
		}
		if rng.Float64()*lambdaMax < rate(t) {
			emit(t)
		}
	}
	return out, nil
}
