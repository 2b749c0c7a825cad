package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

func openbEnv(b *testing.B) *sim.Env {
	b.Helper()
	env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+openb.Default)
	if err != nil {
		b.Fatal(err)
	}
	return env
}

// BenchmarkDecisions runs a full inflate sweep (to 130% of GPU capacity,
// ~10,700 pods) per baseline on the 1,523-node openb cluster and reports
// decisions per second and the cost of one decision (filter + score +
// select over every node).
func BenchmarkDecisions(b *testing.B) {
	env := openbEnv(b)
	for _, f := range baseline.All() {
		b.Run(f.Name, func(b *testing.B) {
			var decisions int
			var busy time.Duration
			for b.Loop() {
				res, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Inflate))
				if err != nil {
					b.Fatal(err)
				}
				decisions += res.Decisions
				busy += time.Duration(res.Measures["decision_us_mean"] * float64(res.Decisions) * 1e3)
			}
			b.ReportMetric(float64(decisions)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(busy.Nanoseconds())/float64(decisions), "ns/decision")
		})
	}
}

// BenchmarkInflateSweepAllBaselines is the speed goal: every
// baseline's full inflate sweep on one seed, one after the other.
func BenchmarkInflateSweepAllBaselines(b *testing.B) {
	env := openbEnv(b)
	for b.Loop() {
		for _, f := range baseline.All() {
			if _, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Inflate)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/sweep")
}

// BenchmarkReplayOpenB replays the openb default trace (arrivals and
// departures at trace times) under FGD.
func BenchmarkReplayOpenB(b *testing.B) {
	env := openbEnv(b)
	f, _ := baseline.Lookup(baseline.FGD)
	for b.Loop() {
		if _, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Replay)); err != nil {
			b.Fatal(err)
		}
	}
}
