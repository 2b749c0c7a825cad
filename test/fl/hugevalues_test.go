package fl

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// TestHugeValuesEveryRule (issue 21, "must show"): 20 sites, 4 of them (20%)
// compromised and sending huge finite values (two 3e38, two 1e30 claiming
// one sample), two rounds under every aggregation rule. With the default
// bounds they are refused at ingest (too_large); with the ingest bound
// turned off (MaxUpdateNorm 0) they reach aggregation, where the default
// clipping bounds them. Either way every round publishes; the robust rules
// land within 2% of FedAvg over the 16 honest sites alone (relative L2
// distance of the applied update); FedAvg with the default clipping and
// no ingest bound is moved (its update is bounded by the clip norm) but
// not stuck, and its model is finite and sane.
func TestHugeValuesEveryRule(t *testing.T) {
	const sites, hostile = 20, 4
	start := fltest.SmallModel(t, 1)
	run := func(t *testing.T, rule string, maxNorm float64, attack bool) ([]float32, coordinator.Round) {
		srv := fltest.StartNATS(t)
		f := newFleet(t, srv.ClientURL(), sites)
		cfg := f.coordinatorConfig(t.TempDir())
		cfg.Aggregator = federated.DefaultAggregatorConfig()
		cfg.Aggregator.Rule, cfg.Aggregator.TrimBeta, cfg.Aggregator.Byzantine = rule, 0.2, hostile
		cfg.MaxUpdateNorm = maxNorm
		cfg.AutoRounds, cfg.Rounds = true, 2
		cfg.MinUpdates = sites - hostile
		c, _ := f.runCoordinator(cfg, start)
		for i, s := range f.sites {
			var tr flclient.Trainer = f.synthetic(0.0005)
			switch {
			case i >= sites-hostile && !attack:
				continue
			case i >= sites-hostile && i%2 == 0:
				tr = &hugeTrainer{value: 3e38, samples: 100}
			case i >= sites-hostile:
				tr = &hugeTrainer{value: 1e30, samples: 1}
			}
			f.startAgent(s, filepath.Join(t.TempDir(), s), tr, func(c *flclient.Config) { c.Seed = uint64(i) })
		}
		want := sites - hostile
		if attack && maxNorm == 0 {
			want = sites
		}
		for round := uint64(1); round <= 2; round++ {
			fltest.Eventually(t, 60*time.Second, fmt.Sprintf("%s: round %d's updates", rule, round), func() (bool, string) {
				rr, err := c.RoundRecord(round)
				if err != nil {
					return false, err.Error()
				}
				rej, _ := c.Rejects()
				return rr.Accepted >= want && (!attack || maxNorm == 0 || rej["too_large"] >= uint64(hostile)*round) || rr.State != coordinator.StateCollecting,
					fmt.Sprintf("%d accepted, refusals %v", rr.Accepted, rej)
			})
			closeNow(t, c, round) // fails the test unless the round publishes
		}
		rr, _ := c.RoundRecord(1)
		w0, w1 := start.Net.Flat(), fetchFloat(t, c, rr.Result)
		d := make([]float32, len(w0))
		for i := range d {
			d[i] = w1[i] - w0[i]
		}
		return d, *rr
	}
	ref, _ := run(t, federated.RuleFedAvg, coordinator.DefaultMaxUpdateNorm, false)
	norm := federated.L2Norm(ref)
	rules := []string{federated.RuleFedAvg, federated.RuleFedBuff, federated.RuleMedian, federated.RuleTrimmedMean, federated.RuleKrum, federated.RuleMultiKrum}
	for _, bound := range []struct {
		name    string
		maxNorm float64
	}{{"default bounds", coordinator.DefaultMaxUpdateNorm}, {"no ingest bound", 0}} {
		for _, rule := range rules {
			t.Run(bound.name+"/"+rule, func(t *testing.T) {
				got, r1 := run(t, rule, bound.maxNorm, true)
				rel := distance(got, ref) / norm
				t.Logf("%s, %s: round 1 %d accepted, update norms max %.3g, clipped %v; relative distance to honest-only FedAvg %.4f",
					bound.name, rule, r1.Accepted, r1.Stats["update_norm_max"], r1.Stats["clipped"], rel)
				robust := rule != federated.RuleFedAvg && rule != federated.RuleFedBuff
				switch {
				case bound.maxNorm > 0 && rel > 0.02:
					t.Errorf("huge updates refused at ingest, yet %.4f from the honest result", rel)
				case robust && rel > 0.02:
					t.Errorf("%s: %.4f from the honest result (want <= 0.02)", rule, rel)
				case !robust && bound.maxNorm == 0 && !(federated.L2Norm(got) <= coordinator.DefaultClipNorm*1.0001):
					t.Errorf("%s: applied update of norm %v exceeds the clip norm %v", rule, federated.L2Norm(got), coordinator.DefaultClipNorm)
				}
			})
		}
	}
}
