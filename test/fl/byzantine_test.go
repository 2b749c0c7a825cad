package fl

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
)

// byzantine trains honestly, then sends Scale times its true delta
// (-10: a sign flip that pushes the other way, +20: a boosted update).
type byzantine struct {
	honest flclient.Trainer
	scale  float32
}

func (b *byzantine) Train(ctx context.Context, base *nn.Model, l federated.LocalTraining, seed uint64) (*nn.Model, int64, error) {
	m, n, err := b.honest.Train(ctx, base, l, seed)
	if err != nil {
		return nil, 0, err
	}
	w, v := base.Net.Flat(), m.Net.Flat()
	delta := make([]float32, len(w))
	for i := range w {
		delta[i] = (b.scale - 1) * (v[i] - w[i])
	}
	return m, n, m.Net.AddFlat(delta, 1)
}

// TestByzantineSites: 20 sites, 4 of them Byzantine (two flip the sign
// of their update x10, two boost it x20), one round per aggregation rule.
// The robust rules land within 2% (relative L2 distance of the applied
// update) of what FedAvg of the 16 honest sites alone gives, while FedAvg
// over all 20 without clipping is thrown far off; the default clipping
// (coordinator.DefaultClipNorm) bounds the harm to FedAvg (the honest
// updates have norms of about 3: the sign-flipped and the boosted ones,
// clipped to 10, cancel out, so 16 of 20 updates move the model, 0.2
// short of the honest step) but does not make it robust.
func TestByzantineSites(t *testing.T) {
	start := fltest.SmallModel(t, 1)
	run := func(rule string, clip float64, withByzantine bool) []float32 {
		srv := fltest.StartNATS(t)
		f := newFleet(t, srv.ClientURL(), 20)
		cfg := f.coordinatorConfig(t.TempDir())
		cfg.ClipNorm = clip
		cfg.Aggregator = federated.DefaultAggregatorConfig()
		cfg.Aggregator.Rule, cfg.Aggregator.TrimBeta, cfg.Aggregator.Byzantine = rule, 0.2, 4
		honest := 16
		cfg.MinUpdates = honest
		if withByzantine {
			cfg.MinUpdates = 20
		}
		c, _ := f.runCoordinator(cfg, start)
		r, err := c.StartRound(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range f.sites {
			var tr flclient.Trainer = f.synthetic(0.0005)
			switch {
			case i >= honest && !withByzantine:
				continue
			case i >= honest && i%2 == 0:
				tr = &byzantine{honest: tr, scale: -10}
			case i >= honest:
				tr = &byzantine{honest: tr, scale: 20}
			}
			f.startAgent(s, filepath.Join(t.TempDir(), s), tr, func(c *flclient.Config) { c.Seed = uint64(i) })
		}
		fltest.Eventually(t, 30*time.Second, "the round's updates", func() (bool, string) {
			rr, _ := c.RoundRecord(r.Round)
			return rr.Accepted >= cfg.MinUpdates, fmt.Sprintf("%d accepted", rr.Accepted)
		})
		closeNow(t, c, r.Round)
		rr, _ := c.RoundRecord(r.Round)
		w0, w1 := start.Net.Flat(), fetchFloat(t, c, rr.Result)
		d := make([]float32, len(w0))
		for i := range d {
			d[i] = w1[i] - w0[i]
		}
		return d
	}
	def := float64(coordinator.DefaultClipNorm)
	ref := run(federated.RuleFedAvg, def, false)
	norm := federated.L2Norm(ref)
	var unclipped, clipped float64
	for _, tc := range []struct {
		rule   string
		clip   float64
		robust bool
	}{
		{federated.RuleFedAvg, 0, false}, {federated.RuleFedAvg, def, false}, {federated.RuleMedian, def, true},
		{federated.RuleTrimmedMean, def, true}, {federated.RuleKrum, def, true}, {federated.RuleMultiKrum, def, true},
	} {
		got := run(tc.rule, tc.clip, true)
		rel := distance(got, ref) / norm
		t.Logf("%-12s clip %-4v relative distance to honest-only FedAvg: %.4f", tc.rule, tc.clip, rel)
		switch {
		case tc.robust && rel > 0.02:
			t.Errorf("%s: %.4f from the honest result (want <= 0.02)", tc.rule, rel)
		case !tc.robust && tc.clip == 0:
			unclipped = rel
			if rel < 0.5 {
				t.Errorf("%s without clipping should be visibly harmed by the Byzantine sites, is only %.4f off", tc.rule, rel)
			}
		case !tc.robust:
			clipped = rel
		}
	}
	if !(clipped < unclipped/2) {
		t.Errorf("FedAvg with the default clipping is %.4f off, without %.4f: clipping should at least halve the harm", clipped, unclipped)
	}
}
