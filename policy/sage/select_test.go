package sage

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestSelect is the hyperparameter selection run (SAGE_SELECT=1): leave
// one training app out, train on the other two, score the third by
// LinkAUC, three seeds each; each line is a variant of the defaults,
// trained (untrained) AUC. It reads training apps only (apps.HeldOut).
// docs/policy.md, "GraphSAGE", has its figures.
func TestSelect(t *testing.T) {
	if os.Getenv("SAGE_SELECT") == "" {
		t.Skip("selection run: set SAGE_SELECT=1")
	}
	names, graphs := trainingApps(t)
	tr := map[string]*Graph{}
	for i, g := range names {
		tr[g] = graphs[i]
		t.Logf("%s: %d services, %d calls", g, len(graphs[i].Services), len(graphs[i].Calls))
	}
	type variant struct {
		name string
		mod  func(*PretrainConfig)
	}
	for _, v := range []variant{
		{"default", func(*PretrainConfig) {}},
		{"dot product", func(c *PretrainConfig) { c.Bilinear = false }},
		{"1 layer", func(c *PretrainConfig) { c.Encoder.Layers, c.Encoder.Fanouts = 1, c.Encoder.Fanouts[:1] }},
		{"first try", func(c *PretrainConfig) { c.Epochs, c.Encoder.Hidden, c.Encoder.Dim = 300, 16, 8 }},
		{"epochs 300", func(c *PretrainConfig) { c.Epochs = 300 }},
		{"epochs 3000", func(c *PretrainConfig) { c.Epochs = 3000 }},
		{"dim 8", func(c *PretrainConfig) { c.Encoder.Dim = 8 }},
		{"hidden 64", func(c *PretrainConfig) { c.Encoder.Hidden = 64 }},
		{"lr 0.003", func(c *PretrainConfig) { c.LR = 0.003 }},
		{"scale 10", func(c *PretrainConfig) { c.Scale = 10 }},
	} {
		var line string
		var sumT, sumU float64
		for _, out := range names {
			var train []*Graph
			for _, n := range names {
				if n != out {
					train = append(train, tr[n])
				}
			}
			for seed := uint64(1); seed <= 3; seed++ {
				cfg := DefaultPretrainConfig()
				cfg.Encoder.Fanouts = append([]int(nil), cfg.Encoder.Fanouts...)
				cfg.Seed = seed
				v.mod(&cfg)
				enc, err := Pretrain(context.Background(), train, cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				u, _ := Untrained(cfg)
				a, err := LinkAUC(enc.Encoder, enc.Decoder, tr[out])
				if err != nil {
					t.Fatal(err)
				}
				b, _ := LinkAUC(u, nil, tr[out])
				sumT += a
				sumU += b
				line += fmt.Sprintf(" %s/%d %.3f(%.3f)", out[:5], seed, a, b)
			}
		}
		t.Logf("%-12s trained %.3f untrained %.3f |%s", v.name, sumT/9, sumU/9, line)
	}
}
