package history

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func start(ms int, seq, installed uint64) Record {
	return Record{T: at(ms), Ev: EvStart, State: &State{Seq: seq, Installed: installed}}
}
func staged(ms int, seq uint64) Record { return Record{T: at(ms), Ev: EvStaged, Seq: seq} }
func installed(ms int, v uint64) Record {
	return Record{T: at(ms), Ev: EvInstalled, Version: v}
}
func stop(ms int, seq uint64, outbox ...uint64) Record {
	return Record{T: at(ms), Ev: EvStop, State: &State{Seq: seq, Outbox: outbox}}
}
func accepted(site string, seq uint64, ms int) Verdict {
	return Verdict{Site: site, Seq: seq, Accepted: true, Time: at(ms)}
}
func refused(site string, seq uint64, reason string) Verdict {
	return Verdict{Site: site, Seq: seq, Reason: reason, Time: at(0)}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name     string
		agents   []Agent
		verdicts []Verdict
		// want checks the report; violation is a substring the first
		// violation must contain ("" for a clean run)
		want      func(*Report) bool
		violation string
	}{
		{
			name: "all applied once",
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), installed(5, 1), staged(10, 1), staged(20, 2), installed(25, 2), stop(100, 2),
			}}},
			verdicts: []Verdict{accepted("a", 1, 40), accepted("a", 2, 120)},
			// latencies 40-10 = 30 ms and 120-20 = 100 ms: p50 is the
			// first (ceil(0.5 x 2) = 1st), p95 and max the second
			want: func(r *Report) bool {
				return r.Written == 2 && r.Applied == 2 && r.Installs == 2 &&
					r.Latency == Latency{N: 2, P50: 30, P95: 100, Max: 100}
			},
		},
		{
			name: "pending and refused are fine",
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), staged(1, 1), staged(2, 2), staged(3, 3), stop(9, 3, 3),
			}}},
			verdicts: []Verdict{accepted("a", 1, 5), refused("a", 2, "stale_round")},
			want: func(r *Report) bool {
				return r.Applied == 1 && r.Refused["stale_round"] == 1 && r.Pending == 1 && r.Lost == 0
			},
		},
		{
			name: "staged but the write failed is not written",
			// seq 2 staged twice (a full disk failed the first write),
			// then never committed: the store's seq stays 1
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), staged(1, 1), staged(2, 2), staged(3, 2), stop(9, 1),
			}}},
			verdicts: []Verdict{accepted("a", 1, 5)},
			want:     func(r *Report) bool { return r.Written == 1 && r.Applied == 1 },
		},
		{
			name:      "lost update",
			agents:    []Agent{{Site: "a", Records: []Record{start(0, 0, 0), staged(1, 1), staged(2, 2), stop(9, 2)}}},
			verdicts:  []Verdict{accepted("a", 1, 5)},
			want:      func(r *Report) bool { return r.Lost == 1 },
			violation: "seq 2 written, never judged",
		},
		{
			name:      "applied twice",
			agents:    []Agent{{Site: "a", Records: []Record{start(0, 0, 0), staged(1, 1), stop(9, 1)}}},
			verdicts:  []Verdict{accepted("a", 1, 5), accepted("a", 1, 7)},
			want:      func(r *Report) bool { return r.AppliedTwice == 1 && r.Applied == 0 },
			violation: "applied 2 times",
		},
		{
			name:      "accepted and refused",
			agents:    []Agent{{Site: "a", Records: []Record{start(0, 0, 0), staged(1, 1), stop(9, 1)}}},
			verdicts:  []Verdict{accepted("a", 1, 5), refused("a", 1, "replay")},
			want:      func(r *Report) bool { return r.MultipleVerdicts == 1 },
			violation: "judged 2 times",
		},
		{
			name:      "verdict on a sequence never written",
			agents:    []Agent{{Site: "a", Records: []Record{start(0, 0, 0), staged(1, 1), stop(9, 1)}}},
			verdicts:  []Verdict{accepted("a", 1, 5), accepted("a", 7, 6)},
			want:      func(r *Report) bool { return r.Phantom == 1 },
			violation: "verdict on seq 7",
		},
		{
			name:      "verdict for a site with no agent",
			agents:    []Agent{{Site: "a", Records: []Record{start(0, 0, 0), stop(9, 0)}}},
			verdicts:  []Verdict{accepted("b", 1, 5)},
			want:      func(r *Report) bool { return r.Phantom == 1 },
			violation: "b: verdict on seq 1 of a site with no agent",
		},
		{
			name: "model version goes back",
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), installed(1, 3), installed(2, 2), stop(9, 0),
			}}},
			want:      func(r *Report) bool { return r.VersionRegressions == 1 },
			violation: "installed model version 2 after 3",
		},
		{
			name: "restart with an older model",
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), installed(1, 3), start(5, 0, 2), stop(9, 0),
			}}},
			want:      func(r *Report) bool { return r.VersionRegressions == 1 && r.Restarts == 1 },
			violation: "restarted with model version 2",
		},
		{
			name: "restart lost a committed update",
			// staging seq 3 means seq 2 was committed; the store came
			// back at 1
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), staged(1, 1), staged(2, 2), staged(3, 3), start(5, 1, 0), stop(9, 1),
			}}},
			verdicts:  []Verdict{accepted("a", 1, 4)},
			want:      func(r *Report) bool { return r.SeqRegressions == 1 },
			violation: "restarted at seq 1, it had committed 2",
		},
		{
			name:      "killed and never stopped",
			agents:    []Agent{{Site: "a", Records: []Record{start(0, 0, 0), staged(1, 1)}}},
			want:      func(*Report) bool { return true },
			violation: "no final state",
		},
		{
			name: "kill and restart keeps everything",
			agents: []Agent{{Site: "a", Records: []Record{
				start(0, 0, 0), staged(1, 1), installed(2, 1), staged(3, 2),
				start(10, 2, 1), staged(11, 3), installed(12, 2), stop(20, 3),
			}}},
			verdicts: []Verdict{accepted("a", 1, 4), accepted("a", 2, 15), accepted("a", 3, 16)},
			want: func(r *Report) bool {
				return r.Written == 3 && r.Applied == 3 && r.Restarts == 1 && r.VersionRegressions == 0
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.agents, tc.verdicts)
			if !tc.want(r) {
				t.Errorf("report %+v does not hold", r)
			}
			switch {
			case tc.violation == "" && !r.OK():
				t.Errorf("violations %q, want none", r.Violations)
			case tc.violation != "" && (r.OK() || !strings.Contains(r.Violations[0], tc.violation)):
				t.Errorf("violations %q, want one containing %q", r.Violations, tc.violation)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	// 1..100 ms: nearest rank p50 = 50th value, p95 = 95th
	var ms []float64
	for i := 100; i >= 1; i-- {
		ms = append(ms, float64(i))
	}
	if got := summarise(ms); got != (Latency{N: 100, P50: 50, P95: 95, Max: 100}) {
		t.Fatalf("summarise = %+v", got)
	}
	if got := summarise(nil); got != (Latency{}) {
		t.Fatalf("summarise(nil) = %+v", got)
	}
}
