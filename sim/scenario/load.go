package scenario

import (
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/carbon"
	"github.com/edgesched/edgesched/sim/disrupt"
	"github.com/edgesched/edgesched/sim/nodeload"
)

// LoadProfile declares how the use of the pods that follow it varies over
// time (sim/nodeload.Profile).
type LoadProfile struct {
	Name            string   `yaml:"name"`
	Amplitude       float64  `yaml:"amplitude"`
	PeakHour        float64  `yaml:"peakHour"`
	BurstsPerDay    float64  `yaml:"burstsPerDay"`
	BurstDuration   Duration `yaml:"burstDuration"`
	BurstMultiplier float64  `yaml:"burstMultiplier"`
	pos             pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (l *LoadProfile) UnmarshalYAML(n *yaml.Node) error {
	type raw LoadProfile
	return strict(n, (*raw)(l), &l.pos)
}

// Disruptions enables node failures in replay (sim/disrupt.Config).
type Disruptions struct {
	NodeFailures bool     `yaml:"nodeFailures"`
	MeanRepair   Duration `yaml:"meanRepair"`
	FixedRepair  bool     `yaml:"fixedRepair"`
	pos          pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (d *Disruptions) UnmarshalYAML(n *yaml.Node) error {
	type raw Disruptions
	return strict(n, (*raw)(d), &d.pos)
}

// Uplink declares a zone's link to the other zones (sim/disrupt.Uplink).
type Uplink struct {
	LossRate     float64  `yaml:"lossRate"`
	FlapsPerDay  float64  `yaml:"flapsPerDay"`
	FlapDuration Duration `yaml:"flapDuration"`
	FlapRTTMs    float64  `yaml:"flapRTTMs"`
	FlapLoss     float64  `yaml:"flapLoss"`
	pos          pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (u *Uplink) UnmarshalYAML(n *yaml.Node) error {
	type raw Uplink
	return strict(n, (*raw)(u), &u.pos)
}

// MaxUsageSpread bounds a template's usageSpread (a lognormal sigma).
const MaxUsageSpread = 2

func (b *builder) loadProfiles() error {
	b.profiles = map[string]bool{}
	for i, lp := range b.s.LoadProfiles {
		f := fmt.Sprintf("loadProfiles[%d]", i)
		switch {
		case lp.Name == "":
			return errAt(lp.pos.line, f+".name", sim.ErrInvalid, "missing")
		case b.profiles[lp.Name]:
			return errAt(lp.pos.at("name"), f+".name", sim.ErrDuplicate, "%q", lp.Name)
		}
		p := nodeload.Profile{Name: lp.Name, Amplitude: lp.Amplitude, PeakHour: lp.PeakHour, BurstsPerDay: lp.BurstsPerDay,
			BurstSeconds: lp.BurstDuration.Seconds(), BurstMultiplier: lp.BurstMultiplier}
		if err := p.Validate(); err != nil {
			return errAt(lp.pos.line, f, sim.ErrInvalid, "%v", err)
		}
		b.profiles[lp.Name] = true
		b.cluster.LoadProfiles = append(b.cluster.LoadProfiles, p)
	}
	if d := b.s.Disruptions; d != nil {
		c := disrupt.Config{NodeFailures: d.NodeFailures, MeanRepairSeconds: d.MeanRepair.Seconds(), FixedRepair: d.FixedRepair}
		if err := c.Validate(); err != nil {
			return errAt(d.pos.at("meanRepair"), "disruptions.meanRepair", sim.ErrInvalid, "%v", err)
		}
		b.cluster.Disruptions = c
	}
	return nil
}

// uplink converts a zone's uplink, validated at its line.
func uplink(u *Uplink, f string) (disrupt.Uplink, error) {
	if u == nil {
		return disrupt.Uplink{}, nil
	}
	out := disrupt.Uplink{LossRate: u.LossRate, FlapsPerDay: u.FlapsPerDay, FlapSeconds: u.FlapDuration.Seconds(), FlapRTTMs: u.FlapRTTMs, FlapLoss: u.FlapLoss}
	if err := out.Validate(); err != nil {
		return out, errAt(u.pos.line, f+".uplink", sim.ErrInvalid, "%v", err)
	}
	return out, nil
}

// spread draws a pod's usage around the template's (a lognormal with mean
// usage and sigma spread), from the scenario seed and the pod's name, so a
// pod keeps its usage across runs and another seed draws another.
func (b *builder) spread(ps *sim.PodSpec, sigma float64) {
	if sigma <= 0 {
		return
	}
	u := ps.CPUUsage
	if u == 0 {
		u = sim.DefaultUsage(ps.Name)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(ps.Name))
	z := normal(b.s.Seed, h.Sum64())
	ps.CPUUsage = min(64, u*math.Exp(sigma*z-sigma*sigma/2))
}

// normal is a standard normal draw from two words (Box–Muller over two
// SplitMix64 outputs).
func normal(a, b uint64) float64 {
	next := func(x uint64) uint64 {
		x += 0x9e3779b97f4a7c15
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
		x = (x ^ (x >> 27)) * 0x94d049bb133111eb
		return x ^ (x >> 31)
	}
	h1 := next(a ^ next(b))
	h2 := next(h1)
	u1 := (float64(h1>>11) + 0.5) / (1 << 53)
	u2 := float64(h2>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// gridZone is a carbon zone whose curve comes from a real grid once the
// trace's span is known.
type gridZone struct {
	index int // in cluster.CarbonZones
	cz    *CarbonZone
	field string
	start time.Time
}

var startLayouts = []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05"}

// gridStart checks a grid carbon zone's keys and parses its start.
func gridStart(cz *CarbonZone, f string) (time.Time, error) {
	switch {
	case len(cz.Curve) > 0:
		return time.Time{}, errAt(cz.pos.at("grid"), f+".grid", sim.ErrInvalid, "give curve or grid, not both")
	case cz.Start == "":
		return time.Time{}, errAt(cz.pos.line, f+".start", sim.ErrInvalid, "a grid needs start: the local date (and time) of hour 0, e.g. 2022-06-01")
	case cz.UTCOffsetHours < -12 || cz.UTCOffsetHours > 14:
		return time.Time{}, errAt(cz.pos.at("utcOffsetHours"), f+".utcOffsetHours", sim.ErrInvalid, "%d, want -12..14", cz.UTCOffsetHours)
	case cz.Hours < 0 || cz.Hours > carbon.Hours:
		return time.Time{}, errAt(cz.pos.at("hours"), f+".hours", sim.ErrInvalid, "%d, want 1..%d (0: the trace's span)", cz.Hours, carbon.Hours)
	}
	for _, l := range startLayouts {
		if t, err := time.Parse(l, cz.Start); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errAt(cz.pos.at("start"), f+".start", sim.ErrInvalid, "%q, want 2022-MM-DD or 2022-MM-DDTHH:MM", cz.Start)
}

// gridCurves cuts the real grids' windows: hours from the zone's start,
// by default the trace's span rounded up to whole days.
func (b *builder) gridCurves() error {
	if len(b.grids) == 0 {
		return nil
	}
	var end int64
	for i := range b.workload.Pods {
		p := &b.workload.Pods[i]
		end = max(end, p.Create, p.Delete)
	}
	days := max(1, (end+86399)/86400)
	for _, g := range b.grids {
		hours := g.cz.Hours
		if hours == 0 {
			hours = int(min(days*24, carbon.Hours))
		}
		s, err := carbon.Load(g.cz.Grid)
		if err != nil {
			return errAt(g.cz.pos.at("grid"), g.field+".grid", ErrUnknownRef, "%v", err)
		}
		curve, err := s.LocalWindow(g.start, g.cz.UTCOffsetHours, hours)
		if err != nil { // wraps carbon.ErrGap or carbon.ErrRange
			return &sim.LineError{Line: g.cz.pos.at("start"), Field: g.field + ".start", Err: err}
		}
		b.cluster.CarbonZones[g.index].Curve = curve
	}
	return nil
}
