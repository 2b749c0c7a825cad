package serving

import (
	"math"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/edgesched/edgesched/kubefmt"
)

// This file maps the agents' node telemetry (the kubefmt.AnnotationTelemetry
// Node annotation) onto the simulator's state.
//
// The policy's "load" feature is sim.Node.CPUUsed / CPU, where CPUUsed is
// kept by sim.State as the sum over the node's pods of request × usage
// (the usage model, or the pod's edgesched.io/cpu-usage annotation). For a
// node with a fresh summary, CPUUsed is replaced by the measured use,
// utilisation × the node's allocatable CPU, so the feature is the measured
// utilisation. Otherwise (missing, malformed or stale summary) CPUUsed is
// the pods' sum exactly as without telemetry, and the fallback is counted.
//
// The annotation is decoded once per NodeInfo generation (convertNode);
// freshness is judged every cycle against the injected clock, since a
// summary ages without its node changing.

// telState is a node's telemetry state in a cycle.
type telState uint8

const (
	telMissing telState = iota // zero: the state of a node never seen
	telFresh
	telStale
	telMalformed
)

// telReasons are the metric's reason labels, by telState.
var telReasons = [...]string{telMissing: "missing", telFresh: "", telStale: "stale", telMalformed: "malformed"}

// nodeTelemetry decodes a node's telemetry annotation: nil, nil when
// absent; nil and the error when malformed.
func nodeTelemetry(n *v1.Node) (*kubefmt.TelemetrySummary, error) {
	a, ok := n.Annotations[kubefmt.AnnotationTelemetry]
	if !ok {
		return nil, nil
	}
	s, err := kubefmt.DecodeTelemetry(a)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// inheritTelemetry carries the nodes' last telemetry states over from the
// previous view (by name), so a rebuilt view does not log them again.
func (v *view) inheritTelemetry(old *view) {
	if old == nil {
		return
	}
	for name, i := range v.index {
		if j, ok := old.index[name]; ok && j < len(old.telState) && i < len(v.telState) {
			v.telState[i] = old.telState[j]
		}
	}
}

// applyTelemetry sets every node's measured load for this cycle (fresh
// telemetry) or restores the usage model's (fallback, counted by reason),
// and logs transitions into and out of stale or malformed telemetry once
// per node. A node whose conversion is the one of its last application
// (same pods, same summary) keeps what was applied until the time its
// summary's freshness can change (telRecheck). Between two full passes
// only the nodes of the snapshot delta are looked at, until the earliest
// recheck time of any node (telNext) or a clock that went back: at 5,000
// nodes with telemetry the pass over every node cost about 1 ms per cycle,
// and the pass over unchanged nodes most of what was left of it. Call
// with c.mu held, after the nodes' pods are bound.
func (c *converter) applyTelemetry(v *view, entries []*nodeEntry, d snapshotDelta) {
	now := time.Now
	if c.clock != nil {
		now = c.clock
	}
	t := now()
	maxAge := c.telMaxAge
	if maxAge <= 0 {
		maxAge = kubefmt.DefaultTelemetryMaxAge
	}
	tn := t.UnixNano()
	full := d.full || tn >= v.telNext || tn < v.telLast
	if full {
		clear(v.telCount[:])
		v.telNext = math.MaxInt64
	}
	v.telLast = tn
	apply := func(i int, e *nodeEntry) {
		// Unchanged since the last cycle (the same conversion, so the same
		// pods and summary, and no freshness bound crossed): nothing to do.
		if v.telEntry[i] == e && tn < v.telRecheck[i] && tn >= v.telAt[i] {
			if full {
				v.telCount[v.telState[i]]++
			}
			v.telNext = min(v.telNext, v.telRecheck[i])
			return
		}
		st, want := telMissing, math.NaN()
		recheck := int64(math.MaxInt64) // missing, malformed or too old: only a new summary changes it
		switch {
		case e.telErr != nil:
			st = telMalformed
		case e.tel == nil:
		case !e.tel.Fresh(t, maxAge):
			st = telStale
			if from := e.tel.Time.Add(-kubefmt.MaxTelemetryClockSkew); t.Before(from) {
				recheck = from.UnixNano() // from the future: fresh from then
			}
		default:
			st, want = telFresh, e.tel.CPU*float64(e.spec.CPU)
			recheck = e.tel.Time.Add(maxAge).UnixNano() + 1 // stale after
		}
		v.telEntry[i], v.telRecheck[i], v.telAt[i] = e, recheck, tn
		v.telNext = min(v.telNext, recheck)
		prev := v.telState[i]
		if full {
			v.telCount[st]++
		} else if prev != st {
			v.telCount[prev]--
			v.telCount[st]++
		}
		if prev != st {
			c.logTelemetry(e, prev, st, t, maxAge)
			v.telState[i] = st
		}
		v.setLoad(i, want)
		if st == telFresh {
			m := &v.st.LoadModel
			runq := m.RunQueueP99Us(e.tel.CPU, float64(e.spec.CPU)) // the /proc fallback measures none
			if e.tel.RunQueueP99Us != nil {
				runq = *e.tel.RunQueueP99Us
			}
			var retrans float64
			if e.tel.RetransPerS != nil {
				retrans = *e.tel.RetransPerS
			}
			mt := m.FromMeasured(e.tel.CPU, e.tel.Mem, e.tel.Load1, runq, retrans)
			v.st.SetMeasured(i, &mt)
		} else {
			v.st.SetMeasured(i, nil) // the usage model's, as for the load
		}
	}
	if full {
		for i, e := range entries {
			apply(i, e)
		}
	} else {
		for _, i := range d.changed {
			apply(int(i), entries[i])
		}
	}
	for st, n := range v.telCount {
		if n > 0 && telState(st) != telFresh {
			metricTelemetryFallbacks.WithLabelValues(telReasons[st]).Add(float64(n))
		}
	}
}

// logTelemetry logs a node's telemetry transition (called once per
// transition, not per cycle).
func (c *converter) logTelemetry(e *nodeEntry, prev, st telState, now time.Time, maxAge time.Duration) {
	node := e.spec.Name
	switch st {
	case telStale:
		c.log.Info("Node telemetry is stale: using the usage model for the node's load until a fresh summary arrives",
			"node", node, "summaryTime", e.tel.Time, "age", e.tel.Age(now).Round(time.Second), "maxAge", maxAge)
	case telMalformed:
		c.log.Info("Node telemetry annotation is malformed: using the usage model for the node's load",
			"node", node, "annotation", kubefmt.AnnotationTelemetry, "err", e.telErr)
	case telFresh:
		if prev == telStale || prev == telMalformed {
			c.log.Info("Node telemetry is usable again", "node", node)
		} else {
			c.log.V(4).Info("Node telemetry in use", "node", node)
		}
	case telMissing:
		if prev != telMissing {
			c.log.V(2).Info("Node telemetry annotation removed: using the usage model for the node's load", "node", node)
		}
	}
}

// setLoad makes node i's CPUUsed the measured use want, or, for NaN, the
// usage model's sum over its bound pods (bit for bit what a state built
// from scratch holds: the pods' terms summed in binding order from 0).
// Nodes that never had telemetry are not touched.
func (v *view) setLoad(i int, want float64) {
	had := !math.IsNaN(v.measured[i])
	if math.IsNaN(want) && !had {
		return
	}
	nd := &v.st.Nodes[i]
	target := want
	if math.IsNaN(want) {
		target = 0
		for _, id := range v.podIDs[i] {
			p := &v.st.Pods[id]
			target += float64(p.CPU) * p.Usage
		}
	}
	v.st.UsedCPU += target - nd.CPUUsed
	nd.CPUUsed = target
	v.measured[i] = want
}
