package policy

import (
	"errors"
	"fmt"
	"math"

	"github.com/edgesched/edgesched/sim"
)

// ErrDecision is wrapped by every refusal of a decision rule.
var ErrDecision = errors.New("policy: bad decision rule")

// MaxBand bounds Decision.Band: a band this wide holds every candidate of
// any model trained here (their score ranges are about 50 logits).
const MaxBand = 1000

// Decision is the rule that turns a model's scores into a choice. It is
// part of the model (field "decision" of model files and artifacts), so a
// model and the int8 artifact quantized from it decide alike.
//
// The zero value is plain argmax: the best score wins.
type Decision struct {
	// Band is a width in score units (the actor's logits). The policy
	// holds every candidate scoring within Band of the best one as good
	// as the best, and FGD's score of the placement (its fragmentation
	// bucket, then its packing key) orders those. A band of b keeps the
	// candidates the actor gives at least e^-b of the best one's
	// probability. 0 turns the band off.
	Band float64 `json:"band,omitzero" yaml:"band"`
	// WholeGPUBand is the band for pods asking for whole GPUs (one device
	// or more, each entirely): the network ranks those placements less
	// well than shared and CPU-only ones, so a wider band hands more of
	// them to FGD. 0 means Band.
	WholeGPUBand float64 `json:"whole_gpu_band,omitzero" yaml:"wholeGPUBand,omitempty"`
	// PressureWeight, when set, orders a GPU pod's in-band candidates by
	// the fgd-pressure teacher's score instead of FGD's: FGD's score less
	// PressureWeight times the pressure of the node's GPU model
	// (sim.ModelDemand.Pressure, exact, not the feature's steps). On a
	// workload where no pod names a GPU model every pressure is 0 and the
	// order is FGD's. 0: FGD's order.
	PressureWeight float64 `json:"pressure_weight,omitzero" yaml:"pressureWeight,omitempty"`
	// StrandWeight, when set, also lowers every pod's in-band key by
	// StrandWeight times the GPU, in devices, the placement strands for
	// lack of CPU or memory (sim.Strand.Delta against the target
	// workload's ratios; negative when it takes stranded devices): with
	// PressureWeight, the fgd-strand teacher's score. 0: no such term.
	StrandWeight float64 `json:"strand_weight,omitzero" yaml:"strandWeight,omitempty"`
	// CPUCap, when set, is a share of a node's CPU in (0, 1]: a candidate
	// on which the pod would bring the node's CPU requests above it
	// (OverCap) ranks below every candidate on which it would not, as
	// long as one of those has a usable score; each group keeps the
	// network's order (Demote). It reads requests only, which the
	// simulator and the plugin know alike, so it needs no telemetry. A
	// rule has either a cap or a band, not both. 0: no cap.
	CPUCap float64 `json:"cpu_cap,omitzero" yaml:"cpuCap,omitempty"`
	// BusyCap, when set, is a share of a node's CPU in (0, 1]: a candidate
	// whose measured CPU busy share, as the cpu_busy feature reads it (in
	// its steps of 1/20; Busy), is at or above it ranks below every
	// candidate that is not (Demote); with CPUCap too, the candidates over
	// the CPU cap rank below all others, busy or not, and within each side
	// of the CPU cap the busy ones rank below the others (when every
	// candidate is over the CPU cap, the busy cap alone moves the choice).
	// It reads the node's telemetry: the
	// agent's summary in the plugin, the node response model in the
	// simulator (the usage model's estimate on a node without a summary).
	// A rule has either caps or a band, not both. 0: no busy cap.
	BusyCap float64 `json:"busy_cap,omitzero" yaml:"busyCap,omitempty"`
}

// MaxPressureWeight bounds Decision.PressureWeight and
// Decision.StrandWeight.
const MaxPressureWeight = 1e6

// Validate checks that both bands are finite and within [0, MaxBand].
func (d Decision) Validate() error {
	for _, b := range []struct {
		name string
		v    float64
	}{{"band", d.Band}, {"whole-GPU band", d.WholeGPUBand}} {
		if math.IsNaN(b.v) || b.v < 0 || b.v > MaxBand {
			return fmt.Errorf("%w: %s %v is outside [0, %d]", ErrDecision, b.name, b.v, MaxBand)
		}
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"pressure weight", d.PressureWeight}, {"strand weight", d.StrandWeight}} {
		if math.IsNaN(w.v) || w.v < 0 || w.v > MaxPressureWeight {
			return fmt.Errorf("%w: %s %v is outside [0, %g]", ErrDecision, w.name, w.v, float64(MaxPressureWeight))
		}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"CPU cap", d.CPUCap}, {"busy cap", d.BusyCap}} {
		if math.IsNaN(c.v) || c.v < 0 || c.v > 1 {
			return fmt.Errorf("%w: %s %v is outside [0, 1] (a share of the node's CPU; 0: none)", ErrDecision, c.name, c.v)
		}
	}
	if (d.CPUCap > 0 || d.BusyCap > 0) && (d.Band > 0 || d.WholeGPUBand > 0 || d.PressureWeight > 0 || d.StrandWeight > 0) {
		return fmt.Errorf("%w: CPU cap %v and busy cap %v with band %v, whole-GPU band %v, pressure weight %v and strand weight %v: a rule has caps or a band (which the weights order), not both", ErrDecision, d.CPUCap, d.BusyCap, d.Band, d.WholeGPUBand, d.PressureWeight, d.StrandWeight)
	}
	return nil
}

// For returns the rule for pod p: Band, or WholeGPUBand (when set) for a
// pod asking for whole GPUs, with the same PressureWeight, StrandWeight,
// CPUCap and BusyCap. Apply then uses its Band.
func (d Decision) For(p *sim.Pod) Decision {
	b := d.Band
	if d.WholeGPUBand > 0 && p.GPUs > 0 && p.GPUMilli >= sim.MilliGPU {
		b = d.WholeGPUBand
	}
	return Decision{Band: b, PressureWeight: d.PressureWeight, StrandWeight: d.StrandWeight, CPUCap: d.CPUCap, BusyCap: d.BusyCap}
}

// Demote rewrites scores (one per candidate; over at least as long) so
// that every candidate with over[i] set ranks below every candidate
// without it, each group in its own order, and returns whether it moved
// anything. The scores without over are left as they are. Nothing moves
// when no candidate is over, or when none without over has a usable
// (finite or +Inf) score. With l the least and b the best finite score
// without over, and m the best finite over score, the over group's finite
// scores move to l - g - (m - s) and a +Inf among them to l - g/2, where
// the gap g = 1 + 1e-6 max(|l|, |b|) stays clear of a caller's relative
// tie tolerance (the simulator's is 1e-9 of the best); a +Inf score
// without over stays above them all (when it is the only usable score
// without over, only the over group's +Inf scores move, to the largest
// finite value). NaN and -Inf scores stay as they are (a -Inf
// without over ranks below the over group). Orders within the over group
// are kept as far as float64 resolves the moved values (score ranges
// beyond about 1e15 lose the smallest differences; a network's span about
// 100). Demote allocates nothing.
func Demote(scores []float64, over []bool) bool {
	over = over[:len(scores)]
	bu, lu, mo := math.Inf(-1), math.Inf(1), math.Inf(-1)
	underInf, overInf, anyOver := false, false, false
	for i, s := range scores {
		switch {
		case math.IsNaN(s) || math.IsInf(s, -1):
		case over[i]:
			anyOver = true
			if math.IsInf(s, 1) {
				overInf = true
			} else {
				mo = max(mo, s)
			}
		case math.IsInf(s, 1):
			underInf = true
		default:
			bu, lu = max(bu, s), min(lu, s)
		}
	}
	switch {
	case !anyOver:
		return false
	case math.IsInf(bu, -1): // no finite score without over
		if !underInf || !overInf {
			return false
		}
		for i, s := range scores {
			if over[i] && math.IsInf(s, 1) {
				scores[i] = math.MaxFloat64
			}
		}
		return true
	case !overInf && mo < lu && lu-mo > 1e-6*max(math.Abs(lu), math.Abs(bu)):
		return false // already below, clear of any tie tolerance
	}
	g := 1 + 1e-6*max(math.Abs(lu), math.Abs(bu))
	for i, s := range scores {
		switch {
		case !over[i] || math.IsNaN(s) || math.IsInf(s, -1):
		case math.IsInf(s, 1):
			scores[i] = lu - g/2
		default:
			scores[i] = lu - g - (mo - s)
		}
	}
	return true
}

// OverCap reports whether a pod asking for podCPU would bring a node of
// nodeCPU whose requests hold requested above share of its CPU (all in
// milli-CPU; share read to the millionth and compared in integers, so a
// node exactly at the cap is not over whatever its size; within the
// simulator's bounds of 1e12 milli-CPU the products fit in an int64).
func OverCap(share float64, requested, podCPU, nodeCPU int64) bool {
	c := int64(math.Round(share * 1e6))
	return (requested+podCPU)*1_000_000 > c*nodeCPU
}

// Busy reports whether a node whose cpu_busy feature holds step steps of
// 1/20 (the measured CPU busy share, rounded to the step) is at or above
// share: step/20 >= share, compared so that a share on a step (0.9: 18)
// counts the node at that step busy.
func Busy(share float64, step uint64) bool {
	return float64(step) >= share*cpuSteps-1e-9
}

// Apply rewrites scores (one per candidate, the model's) into decision
// scores whose highest value is the rule's choice. With a band, every
// candidate within Band of the best is lifted above all others and ordered
// by key(i) (FGD's score of candidate i, called once for each candidate in
// the band, in increasing i); candidates outside the band keep their
// order (their scores less the best). Equal keys stay equal, so the
// caller's tie-break among them is unchanged. NaN
// scores are never in the band, and a NaN or infinite key ranks last in
// it. keys is scratch space of at least len(scores) values; Apply
// allocates nothing.
func (d Decision) Apply(scores, keys []float64, key func(i int) float64) {
	if !(d.Band > 0) || len(scores) < 2 {
		return
	}
	band := min(d.Band, MaxBand)
	best := math.Inf(-1)
	for _, s := range scores {
		if s > best { // false for NaN (a comparison, not max: a hot loop)
			best = s
		}
	}
	if math.IsInf(best, 0) {
		return // no finite best (none at all, or +Inf): argmax decides
	}
	// Scores are rewritten relative to the best, so their magnitude (and
	// the caller's relative tie tolerance) is FGD's own, whatever the
	// network's logit level: out-of-band candidates to s - best (at most
	// -band), in-band ones to 1 + (key - kmin), an unusable key to 0.5.
	keys = keys[:len(scores)]
	thr := best - band
	kmin := math.Inf(1)
	for i, s := range scores {
		keys[i] = math.NaN()
		if s >= thr {
			k := key(i)
			if math.IsNaN(k) || math.IsInf(k, 0) {
				k = math.Inf(-1)
			} else {
				kmin = min(kmin, k)
			}
			keys[i] = k
		}
	}
	for i, k := range keys {
		switch {
		case math.IsNaN(k): // outside the band
			scores[i] -= best
		case math.IsInf(k, -1):
			scores[i] = 0.5
		default:
			scores[i] = 1 + (k - kmin)
		}
	}
}
