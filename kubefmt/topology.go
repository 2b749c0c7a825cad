package kubefmt

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/edgesched/edgesched/sim"
)

// The site topology: what the nodes' zone labels alone do not say. Which
// electricity grid (carbon zone) each zone draws from, that grid's hourly
// carbon intensity, and the round-trip times between zones. An operator
// writes it (or a tool fed by a grid-intensity service); the scheduler
// plugin reads it into the simulator's zones, carbon curves and network,
// so the policy's carbon feature and the RTT to a pod's dependency
// neighbours see the site as it is (docs/edge-plugin.md, "Site
// topology"). Without it every zone has the flat DefaultCarbonIntensity
// and the default LAN/WAN RTTs.
const (
	// DefaultTopologyConfigMapName is the ConfigMap the topology is read
	// from, in the site's namespace.
	DefaultTopologyConfigMapName = "edgesched-topology"
	// TopologyConfigMapKey is the key of the topology in its ConfigMap's
	// data.
	TopologyConfigMapKey = "topology.json"

	// TopologyVersion is the format version Encode writes.
	TopologyVersion = 1
	// MaxTopologyBytes bounds an encoded topology (a ConfigMap holds at
	// most 1 MiB).
	MaxTopologyBytes = 1 << 20
	// MaxTopologyZones bounds the zones (those listed and those pairs
	// name, together), and separately the carbon zones.
	MaxTopologyZones = 1024
	// MaxTopologyPairs bounds the zone pairs with their own RTT.
	MaxTopologyPairs = 8192
	// MaxCarbonCurve bounds a carbon curve: at most a week of hours.
	MaxCarbonCurve = 168
)

// ErrTopology marks a site topology that does not decode or validate; the
// error names the field.
var ErrTopology = errors.New("kubefmt: bad site topology")

// Topology is the site topology (format version 1, JSON).
type Topology struct {
	Version int `json:"version"`
	// Zones gives zones (the nodes' topology.kubernetes.io/zone values)
	// their carbon zone. A zone not listed, or listed without a carbon
	// zone, uses the carbon zone of its own name if there is one, else
	// the flat default.
	Zones []TopologyZone `json:"zones,omitempty"`
	// CarbonZones are grid regions with their carbon intensity.
	CarbonZones []CarbonZone `json:"carbonZones,omitempty"`
	// Network gives the RTTs between zones; absent: the default (0.5 ms
	// inside a zone, 30 ms between zones).
	Network *Network `json:"network,omitempty"`
}

// TopologyZone is one zone and the grid it draws from.
type TopologyZone struct {
	Name       string `json:"name"`
	CarbonZone string `json:"carbonZone,omitempty"`
}

// CarbonZone is a grid region's carbon intensity in gCO2/kWh, hour by
// hour: at Unix time t the intensity is GramsPerKWh[(t / 3600) mod n]. So
// 24 values are the hours of the day in UTC (value 0 from 00:00 to 01:00
// UTC), one value is a flat intensity, and 168 values are the hours of a
// week starting Thursday 00:00 UTC (the Unix epoch's weekday).
type CarbonZone struct {
	Name        string    `json:"name"`
	GramsPerKWh []float64 `json:"gramsPerKWh"`
}

// Network is the round-trip times between zones, in milliseconds.
type Network struct {
	IntraZoneMs float64    `json:"intraZoneMs"`
	InterZoneMs float64    `json:"interZoneMs"`
	Pairs       []ZonePair `json:"pairs,omitempty"`
}

// ZonePair is one pair of zones with its own RTT (symmetric).
type ZonePair struct {
	A  string  `json:"a"`
	B  string  `json:"b"`
	Ms float64 `json:"ms"`
}

// topologyShape is the keys of the format's objects.
var topologyShape = &jsonShape{fields: map[string]*jsonShape{
	"version":     nil,
	"zones":       {elem: &jsonShape{fields: map[string]*jsonShape{"name": nil, "carbonZone": nil}}},
	"carbonZones": {elem: &jsonShape{fields: map[string]*jsonShape{"name": nil, "gramsPerKWh": nil}}},
	"network": {fields: map[string]*jsonShape{"intraZoneMs": nil, "interZoneMs": nil,
		"pairs": {elem: &jsonShape{fields: map[string]*jsonShape{"a": nil, "b": nil, "ms": nil}}}}},
}}

// Validate checks the version, the bounds and names, that every carbon
// zone a zone names exists, that no zone, carbon zone or pair repeats,
// and every number: intensities finite in [0, sim.MaxCarbon], RTTs finite
// in [0, sim.MaxRTTMs].
func (t *Topology) Validate() error {
	if t.Version != TopologyVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrTopology, t.Version, TopologyVersion)
	}
	if len(t.Zones) > MaxTopologyZones || len(t.CarbonZones) > MaxTopologyZones {
		return fmt.Errorf("%w: %d zones and %d carbon zones, at most %d each", ErrTopology, len(t.Zones), len(t.CarbonZones), MaxTopologyZones)
	}
	carbon := make(map[string]bool, len(t.CarbonZones))
	for i, c := range t.CarbonZones {
		if err := validName("carbon zone", c.Name); err != nil {
			return fmt.Errorf("%w: carbonZones[%d].name: %v", ErrTopology, i, err)
		}
		if carbon[c.Name] {
			return fmt.Errorf("%w: carbonZones[%d]: %s given twice", ErrTopology, i, c.Name)
		}
		carbon[c.Name] = true
		if n := len(c.GramsPerKWh); n < 1 || n > MaxCarbonCurve {
			return fmt.Errorf("%w: carbonZones[%d] (%s): %d hourly values, want 1 to %d", ErrTopology, i, c.Name, n, MaxCarbonCurve)
		}
		for h, v := range c.GramsPerKWh {
			if !inClosed(v, sim.MaxCarbon) {
				return fmt.Errorf("%w: carbonZones[%d] (%s): gramsPerKWh[%d] = %v, want a finite number in [0, %g]", ErrTopology, i, c.Name, h, v, float64(sim.MaxCarbon))
			}
		}
	}
	zones := make(map[string]bool, len(t.Zones))
	for i, z := range t.Zones {
		if err := validName("zone", z.Name); err != nil {
			return fmt.Errorf("%w: zones[%d].name: %v", ErrTopology, i, err)
		}
		if zones[z.Name] {
			return fmt.Errorf("%w: zones[%d]: %s given twice", ErrTopology, i, z.Name)
		}
		zones[z.Name] = true
		if z.CarbonZone != "" && !carbon[z.CarbonZone] {
			return fmt.Errorf("%w: zones[%d] (%s): carbon zone %q is not in carbonZones", ErrTopology, i, z.Name, z.CarbonZone)
		}
	}
	if nw := t.Network; nw != nil {
		if !inClosed(nw.IntraZoneMs, sim.MaxRTTMs) || !inClosed(nw.InterZoneMs, sim.MaxRTTMs) {
			return fmt.Errorf("%w: network: intraZoneMs %v, interZoneMs %v, want finite numbers in [0, %g]", ErrTopology, nw.IntraZoneMs, nw.InterZoneMs, float64(sim.MaxRTTMs))
		}
		if len(nw.Pairs) > MaxTopologyPairs {
			return fmt.Errorf("%w: network: %d pairs, at most %d", ErrTopology, len(nw.Pairs), MaxTopologyPairs)
		}
		seen := make(map[[2]string]bool, len(nw.Pairs))
		for i, p := range nw.Pairs {
			for _, n := range []struct{ field, v string }{{"a", p.A}, {"b", p.B}} {
				if err := validName("zone", n.v); err != nil {
					return fmt.Errorf("%w: network.pairs[%d].%s: %v", ErrTopology, i, n.field, err)
				}
			}
			if p.A == p.B {
				return fmt.Errorf("%w: network.pairs[%d]: a zone with itself (%s; intraZoneMs is that RTT)", ErrTopology, i, p.A)
			}
			if !inClosed(p.Ms, sim.MaxRTTMs) {
				return fmt.Errorf("%w: network.pairs[%d] (%s-%s): ms %v, want a finite number in [0, %g]", ErrTopology, i, p.A, p.B, p.Ms, float64(sim.MaxRTTMs))
			}
			k := [2]string{min(p.A, p.B), max(p.A, p.B)}
			if seen[k] {
				return fmt.Errorf("%w: network.pairs[%d]: %s-%s given twice", ErrTopology, i, p.A, p.B)
			}
			seen[k] = true
			zones[p.A], zones[p.B] = true, true
			if len(zones) > MaxTopologyZones {
				return fmt.Errorf("%w: network.pairs[%d]: more than %d zones named in zones and pairs", ErrTopology, i, MaxTopologyZones)
			}
		}
	}
	return nil
}

func inClosed(v, hi float64) bool { return !math.IsNaN(v) && v >= 0 && v <= hi }

// Encode validates t and writes it as JSON with its lists sorted by name
// (pairs by their zones), so the same topology always encodes to the
// same bytes.
func (t *Topology) Encode() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	c := *t
	c.Zones = slices.Clone(t.Zones)
	slices.SortFunc(c.Zones, func(a, b TopologyZone) int { return cmp.Compare(a.Name, b.Name) })
	c.CarbonZones = slices.Clone(t.CarbonZones)
	slices.SortFunc(c.CarbonZones, func(a, b CarbonZone) int { return cmp.Compare(a.Name, b.Name) })
	if t.Network != nil {
		nw := *t.Network
		nw.Pairs = slices.Clone(nw.Pairs)
		for i, p := range nw.Pairs {
			if p.B < p.A {
				nw.Pairs[i].A, nw.Pairs[i].B = p.B, p.A
			}
		}
		slices.SortFunc(nw.Pairs, func(a, b ZonePair) int { return cmp.Or(cmp.Compare(a.A, b.A), cmp.Compare(a.B, b.B)) })
		c.Network = &nw
	}
	return encodeBounded(&c, MaxTopologyBytes, "site topology", ErrTopology)
}

// DecodeTopology reads and validates an encoded topology: at most
// MaxTopologyBytes, one JSON object whose keys are exactly the format's
// (case-sensitive, none twice, no unknown ones), nothing after it, and
// whose canonical encoding (Encode) fits MaxTopologyBytes too.
func DecodeTopology(b []byte) (*Topology, error) {
	return decodeValid[Topology](b, MaxTopologyBytes, topologyShape, ErrTopology)
}
