package aggregation

import (
	"testing"

	"github.com/edgesched/edgesched/federated"
)

// TestSumSpec: which rounds sum their updates, and the bounds their fixed
// point is sized for.
func TestSumSpec(t *testing.T) {
	base := SumConfig{Aggregator: federated.DefaultAggregatorConfig(), MaxSamples: 1000, ClipNorm: 10, MaxUpdateNorm: 1000}
	for _, tc := range []struct {
		name       string
		edit       func(*SumConfig)
		sums       bool
		rule       string
		maxWeight  float64
		maxAbs     float64
		unitWeight bool
	}{
		{"fedavg", func(*SumConfig) {}, true, federated.RuleFedAvg, 1000, 10, false},
		{"no rule is fedavg", func(c *SumConfig) { c.Aggregator.Rule = "" }, true, federated.RuleFedAvg, 1000, 10, false},
		{"fedbuff", func(c *SumConfig) { c.Aggregator.Rule = federated.RuleFedBuff }, true, federated.RuleFedBuff, 1000, 10, false},
		{"the norm bound when tighter", func(c *SumConfig) { c.MaxUpdateNorm = 5 }, true, federated.RuleFedAvg, 1000, 5, false},
		{"no clip: the norm bound", func(c *SumConfig) { c.ClipNorm = 0 }, true, federated.RuleFedAvg, 1000, 1000, false},
		{"dp weighs 1", func(c *SumConfig) { c.UnitWeight, c.MaxSamples = true, 0 }, true, federated.RuleFedAvg, 1, 10, true},
		{"robust rule stores", func(c *SumConfig) { c.Aggregator.Rule = federated.RuleMedian }, false, "", 0, 0, false},
		{"store payloads", func(c *SumConfig) { c.StorePayloads = true }, false, "", 0, 0, false},
		{"no bound on weights", func(c *SumConfig) { c.MaxSamples = 0 }, false, "", 0, 0, false},
		{"no bound on values", func(c *SumConfig) { c.ClipNorm, c.MaxUpdateNorm = 0, 0 }, false, "", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			spec := SumSpec(cfg, 8)
			if (spec != nil) != tc.sums {
				t.Fatalf("SumSpec = %+v, want summing %v", spec, tc.sums)
			}
			if spec == nil {
				return
			}
			if spec.Rule != tc.rule || spec.N != 8 || spec.MaxWeight != tc.maxWeight || spec.MaxAbs != tc.maxAbs || spec.UnitWeight != tc.unitWeight {
				t.Fatalf("SumSpec = %+v, want rule %s, 8 updates, weights <= %v, values <= %v, unit weight %v", spec, tc.rule, tc.maxWeight, tc.maxAbs, tc.unitWeight)
			}
			if shift, wshift, _ := federated.FixedShifts(8, tc.maxWeight, tc.maxAbs); spec.Shift != shift || spec.WShift != wshift {
				t.Fatalf("shifts %d/%d, want %d/%d", spec.Shift, spec.WShift, shift, wshift)
			}
		})
	}
}
