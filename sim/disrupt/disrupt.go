// Package disrupt draws the disruptions of a replay: node failures (a node
// goes down, its pods are evicted, it comes back after a repair time) and
// uplink flaps (a zone's link to the others degrades for a while: its RTT
// to every other zone spikes, or it is cut off, and its loss rises).
//
// Schedule is a pure function of its inputs and the random stream it is
// given; the simulator seeds that stream from the run's seed, so two
// policies run with one seed meet the same failures. Failures are a
// renewal process per node: exponential times to failure at the node's
// rate while it is up, then an exponential repair time (or exactly
// MeanRepairSeconds with FixedRepair). Flaps are a Poisson process per
// zone, each lasting FlapSeconds; flaps that would overlap are merged.
package disrupt

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrInvalid wraps every validation error of the package.
var ErrInvalid = errors.New("disrupt: invalid value")

// Uplink is a zone's link to the other zones. The zero Uplink is reliable.
type Uplink struct {
	// LossRate is the packet loss share on the link in normal times.
	LossRate float64
	// FlapsPerDay is the rate of flaps; each lasts FlapSeconds, during
	// which the zone's RTT to every other zone is FlapRTTMs (a spike, or a
	// timeout-sized figure for a partition) and its loss is FlapLoss.
	FlapsPerDay float64
	FlapSeconds int64
	FlapRTTMs   float64
	FlapLoss    float64
}

// MaxRTTMs bounds a flap's RTT (the simulator's own bound).
const MaxRTTMs = 1e6

// Validate checks the ranges.
func (u *Uplink) Validate() error {
	switch {
	case !(u.LossRate >= 0 && u.LossRate <= 1) || !(u.FlapLoss >= 0 && u.FlapLoss <= 1):
		return fmt.Errorf("%w: loss rates must be shares in [0, 1], got %v and %v", ErrInvalid, u.LossRate, u.FlapLoss)
	case !(u.FlapsPerDay >= 0 && u.FlapsPerDay <= 1000):
		return fmt.Errorf("%w: flaps per day %v, want [0, 1000]", ErrInvalid, u.FlapsPerDay)
	case u.FlapsPerDay > 0 && (u.FlapSeconds <= 0 || u.FlapSeconds > 86400):
		return fmt.Errorf("%w: flap duration %d s, want (0, 86400]", ErrInvalid, u.FlapSeconds)
	case !(u.FlapRTTMs >= 0 && u.FlapRTTMs <= MaxRTTMs):
		return fmt.Errorf("%w: flap RTT %v ms, want [0, %g]", ErrInvalid, u.FlapRTTMs, float64(MaxRTTMs))
	}
	return nil
}

// Config enables disruptions in replay. The zero Config has none.
type Config struct {
	// NodeFailures makes nodes fail at their FailureRate (per day).
	NodeFailures bool
	// MeanRepairSeconds is the mean time a failed node stays down (> 0
	// with NodeFailures); FixedRepair makes every repair take exactly that.
	MeanRepairSeconds int64
	FixedRepair       bool
}

// Validate checks the ranges.
func (c *Config) Validate() error {
	if c.NodeFailures && (c.MeanRepairSeconds <= 0 || c.MeanRepairSeconds > 30*86400) {
		return fmt.Errorf("%w: mean repair time %d s, want (0, 30 days]", ErrInvalid, c.MeanRepairSeconds)
	}
	return nil
}

// Kind is what an event does.
type Kind uint8

// Event kinds, in the order they apply at equal times.
const (
	NodeUp Kind = iota
	FlapEnd
	NodeDown
	FlapStart
)

func (k Kind) String() string {
	return [...]string{"node-up", "flap-end", "node-down", "flap-start"}[k]
}

// Event is one disruption: at time T (seconds), Kind happens to node or
// zone Index.
type Event struct {
	T     int64
	Kind  Kind
	Index int32
}

// MaxEvents bounds a schedule (a runaway rate is an input error).
const MaxEvents = 1_000_000

// Schedule draws the events in [t0, t1), sorted by time, then kind, then
// index. failuresPerDay[i] is node i's rate (used with NodeFailures);
// uplinks[z] is zone z's link. A node down at t1 stays down.
func Schedule(rng *rand.Rand, t0, t1 int64, c Config, failuresPerDay []float64, uplinks []Uplink) ([]Event, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []Event
	add := func(e Event) error {
		if len(out) >= MaxEvents {
			return fmt.Errorf("%w: more than %d disruption events (rates too high for the trace's length)", ErrInvalid, MaxEvents)
		}
		out = append(out, e)
		return nil
	}
	if c.NodeFailures {
		for i, rate := range failuresPerDay {
			if !(rate > 0) {
				continue
			}
			for t := float64(t0); ; {
				t += rng.ExpFloat64() * 86400 / rate
				if t >= float64(t1) {
					break
				}
				repair := float64(c.MeanRepairSeconds)
				if !c.FixedRepair {
					repair = min(rng.ExpFloat64()*repair, 50*repair)
				}
				down := int64(t)
				up := down + max(1, int64(math.Round(repair)))
				if err := add(Event{T: down, Kind: NodeDown, Index: int32(i)}); err != nil {
					return nil, err
				}
				if up < t1 {
					if err := add(Event{T: up, Kind: NodeUp, Index: int32(i)}); err != nil {
						return nil, err
					}
				}
				t = float64(up)
			}
		}
	}
	for z, u := range uplinks {
		if !(u.FlapsPerDay > 0) {
			continue
		}
		end := int64(math.MinInt64)
		for t := float64(t0); ; {
			t += rng.ExpFloat64() * 86400 / u.FlapsPerDay
			if t >= float64(t1) {
				break
			}
			start := int64(t)
			if start <= end { // overlaps the last flap: extend it
				end = start + u.FlapSeconds
				out[len(out)-1].T = end
				continue
			}
			end = start + u.FlapSeconds
			if err := add(Event{T: start, Kind: FlapStart, Index: int32(z)}); err != nil {
				return nil, err
			}
			if err := add(Event{T: end, Kind: FlapEnd, Index: int32(z)}); err != nil {
				return nil, err
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.T, b.T), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Index, b.Index))
	})
	// a flap extended past the end ends with the trace
	n, _ := slices.BinarySearchFunc(out, t1, func(e Event, t int64) int { return cmp.Compare(e.T, t) })
	return out[:n], nil
}
