package history

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Agent is one agent's history, read back after the run.
type Agent struct {
	Site    string
	Records []Record
}

// Latency summarises outbox-write-to-acceptance times.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	Max float64 `json:"max_ms"`
}

// Report is what Check found. Every count is over all agents.
type Report struct {
	Agents int `json:"agents"`
	// Written: updates committed to an outbox (sequences 1..final).
	Written int `json:"written"`
	// Applied: accepted by the coordinator exactly once.
	Applied int `json:"applied"`
	// Refused: judged once and refused, by reason (e.g. stale_round in
	// sync mode for a site cut off past the deadline).
	Refused map[string]int `json:"refused"`
	// Pending: no verdict, still in the outbox at the end.
	Pending int `json:"pending"`
	// JudgedAndPending: judged, and still in the outbox (its stream ack
	// was lost; a resend is a duplicate).
	JudgedAndPending int `json:"judged_and_pending"`
	// Lost: written, no verdict, not in the outbox.
	Lost int `json:"lost"`
	// AppliedTwice: accepted more than once; MultipleVerdicts: judged
	// more than once in any other combination.
	AppliedTwice     int `json:"applied_twice"`
	MultipleVerdicts int `json:"multiple_verdicts"`
	// Phantom: verdicts on sequences no agent wrote.
	Phantom int `json:"phantom"`
	// DroppedFull: updates the agents' outboxes dropped or refused when
	// full (their own count).
	DroppedFull int `json:"dropped_full"`
	// Installs and VersionRegressions: model versions installed, and
	// installs (or restarts) whose version was not above every earlier
	// one of the same agent.
	Installs           int `json:"installs"`
	VersionRegressions int `json:"version_regressions"`
	// SeqRegressions: restarts whose store had lost a committed update.
	SeqRegressions int `json:"seq_regressions"`
	// Restarts: agent starts after the first.
	Restarts int `json:"restarts"`
	// RefusedModels: models the agents refused, by reason.
	RefusedModels map[string]int `json:"refused_models"`
	// Latency of applied updates (outbox write to acceptance, real clock).
	Latency Latency `json:"latency"`
	// Violations describe every broken invariant (at most MaxViolations;
	// ViolationCount is the full count).
	Violations     []string `json:"violations,omitempty"`
	ViolationCount int      `json:"violation_count"`
}

// MaxViolations bounds Report.Violations.
const MaxViolations = 200

func (r *Report) violate(format string, a ...any) {
	r.ViolationCount++
	if len(r.Violations) < MaxViolations {
		r.Violations = append(r.Violations, fmt.Sprintf(format, a...))
	}
}

// OK reports whether no invariant broke.
func (r *Report) OK() bool { return r.ViolationCount == 0 }

// Check holds the agents' histories against the coordinator's verdicts:
//
//   - every update an agent committed to its outbox got exactly one
//     verdict (accepted: applied; or refused with a reason), or is still
//     in its outbox; none is lost, none applied twice;
//   - no verdict names a sequence its site never wrote;
//   - each agent's installed model versions only increase, across its
//     restarts too (the store must not come back with an older model);
//   - an agent's store never comes back from a kill without an update it
//     had committed.
//
// Every agent must have stopped cleanly (a final EvStop record).
func Check(agents []Agent, verdicts []Verdict) *Report {
	rep := &Report{Agents: len(agents), Refused: map[string]int{}, RefusedModels: map[string]int{}}
	bySite := map[string]map[uint64][]Verdict{}
	for _, v := range verdicts {
		if bySite[v.Site] == nil {
			bySite[v.Site] = map[uint64][]Verdict{}
		}
		bySite[v.Site][v.Seq] = append(bySite[v.Site][v.Seq], v)
	}
	known := map[string]bool{}
	var lat []float64
	for _, a := range agents {
		known[a.Site] = true
		lat = append(lat, checkAgent(rep, a, bySite[a.Site])...)
	}
	for site, seqs := range bySite {
		if !known[site] {
			for seq := range seqs {
				rep.Phantom++
				rep.violate("%s: verdict on seq %d of a site with no agent", site, seq)
			}
		}
	}
	rep.Latency = summarise(lat)
	return rep
}

// checkAgent checks one agent and returns its applied updates' latencies
// in milliseconds.
func checkAgent(rep *Report, a Agent, verdicts map[uint64][]Verdict) []float64 {
	var final *State
	written := map[uint64]time.Time{} // seq -> last staged time
	var maxInstalled uint64
	var lastStaged uint64 // newest seq staged in the current run
	starts := 0
	for _, r := range a.Records {
		switch r.Ev {
		case EvStart:
			starts++
			if r.State.Installed < maxInstalled {
				rep.VersionRegressions++
				rep.violate("%s: restarted with model version %d installed, it had installed %d", a.Site, r.State.Installed, maxInstalled)
			}
			// staging seq s means s-1 was committed: the store must
			// still hold at least that
			if lastStaged > 0 && r.State.Seq < lastStaged-1 {
				rep.SeqRegressions++
				rep.violate("%s: restarted at seq %d, it had committed %d", a.Site, r.State.Seq, lastStaged-1)
			}
			lastStaged = 0
			final = nil
		case EvStaged:
			written[r.Seq] = r.T
			lastStaged = r.Seq
		case EvInstalled:
			rep.Installs++
			if r.Version <= maxInstalled {
				rep.VersionRegressions++
				rep.violate("%s: installed model version %d after %d", a.Site, r.Version, maxInstalled)
			}
			maxInstalled = max(maxInstalled, r.Version)
		case EvStop:
			final = r.State
		}
	}
	rep.Restarts += max(starts-1, 0)
	if final == nil {
		rep.violate("%s: no final state (the agent did not stop cleanly after its last start)", a.Site)
		return nil
	}
	rep.DroppedFull += final.DroppedFull
	for reason, n := range final.RefusedModels {
		rep.RefusedModels[reason] += n
	}
	pending := map[uint64]bool{}
	for _, s := range final.Outbox {
		pending[s] = true
	}
	var lat []float64
	for seq := uint64(1); seq <= final.Seq; seq++ {
		rep.Written++
		at, staged := written[seq]
		if !staged {
			rep.violate("%s: seq %d is in the store's sequence but was never staged (incomplete history)", a.Site, seq)
		}
		vs := verdicts[seq]
		accepted := 0
		for _, v := range vs {
			if v.Accepted {
				accepted++
			}
		}
		switch {
		case len(vs) == 0 && pending[seq]:
			rep.Pending++
		case len(vs) == 0:
			rep.Lost++
			rep.violate("%s: seq %d written, never judged, not in the outbox: lost", a.Site, seq)
		case accepted > 1:
			rep.AppliedTwice++
			rep.violate("%s: seq %d applied %d times", a.Site, seq, accepted)
		case len(vs) > 1:
			rep.MultipleVerdicts++
			rep.violate("%s: seq %d judged %d times: %+v", a.Site, seq, len(vs), vs)
		case accepted == 1:
			rep.Applied++
			if staged {
				lat = append(lat, float64(vs[0].Time.Sub(at))/float64(time.Millisecond))
			}
		default:
			rep.Refused[vs[0].Reason]++
		}
		if len(vs) > 0 && pending[seq] {
			rep.JudgedAndPending++
		}
	}
	for seq := range verdicts {
		if seq == 0 || seq > final.Seq {
			rep.Phantom++
			rep.violate("%s: verdict on seq %d, the agent wrote up to %d", a.Site, seq, final.Seq)
		}
	}
	return lat
}

// summarise computes nearest-rank percentiles.
func summarise(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	s := slices.Clone(ms)
	sort.Float64s(s)
	rank := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1 // ceil(p n) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Latency{N: len(s), P50: rank(0.50), P95: rank(0.95), Max: s[len(s)-1]}
}
