package models_test

import (
	"context"
	"testing"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
)

// BenchmarkInflateSweep compares the shipped default model's full inflate
// sweep (to 130% of GPU capacity, ~10,700 pods, 1,523 nodes, float path)
// with FGD's: the goal is within 3x of FGD's time. Compare the
// ns/op of the two sub-benchmarks.
func BenchmarkInflateSweep(b *testing.B) {
	m, err := models.Default()
	if err != nil {
		b.Fatal(err)
	}
	fgd, _ := baseline.Lookup("fgd")
	// default, and gpuspec10, where a third of the pods name GPU models
	// and the learned policy's sweep costs the most (docs/training.md,
	// "Cost")
	for _, trace := range []string{openb.Default, openb.GPUSpec10} {
		env, err := openb.LoadEnv("openb:"+openb.AllNodes, "openb:"+trace)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range []sim.Factory{fgd, nn.Factory("learned", m)} {
			b.Run(trace+"/"+f.Name, func(b *testing.B) {
				var decisions int
				for b.Loop() {
					res, err := engine.Run(context.Background(), env, f, engine.DefaultRunConfig(engine.Inflate))
					if err != nil {
						b.Fatal(err)
					}
					decisions += res.Decisions
				}
				b.ReportMetric(float64(decisions)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}
