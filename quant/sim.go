package quant

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
)

// recorder passes scoring through and keeps a seeded reservoir sample of
// the raw rows it saw.
type recorder struct {
	inner policy.Scorer
	// affinity is the model's AffinityEncoder (policy.AffinityReader)
	affinity string
	rows     []float32
	seen     int
	max      int
	rng      *rand.Rand
}

// AffinityEncoder implements policy.AffinityReader.
func (r *recorder) AffinityEncoder() string { return r.affinity }

func (r *recorder) Scores(raw []float32, k int, out []float32) error {
	F := policy.NumFeatures
	for i := range k {
		row := raw[i*F : (i+1)*F]
		switch {
		case r.seen < r.max:
			r.rows = append(r.rows, row...)
		default:
			if j := r.rng.IntN(r.seen + 1); j < r.max {
				copy(r.rows[j*F:(j+1)*F], row)
			}
		}
		r.seen++
	}
	return r.inner.Scores(raw, k, out)
}

// CollectRows runs the float model on env once per run configuration and
// returns up to maxRows raw candidate rows (a reservoir sample seeded by
// seed, so the same inputs give the same rows) and how many rows were
// seen. Use runs whose seeds are not the ones the quantized model will be
// judged on.
func CollectRows(ctx context.Context, env *sim.Env, m *policy.FloatModel, runs []engine.RunConfig, maxRows int, seed uint64) ([]float32, int, error) {
	if maxRows < 1 {
		return nil, 0, fmt.Errorf("%w: maxRows %d", ErrQuant, maxRows)
	}
	if m == nil || m.NewScorer == nil {
		return nil, 0, fmt.Errorf("%w: no float network to run (policy/nn's Model.Float gives one)", ErrQuant)
	}
	rec := &recorder{max: maxRows, rng: rand.New(rand.NewPCG(seed, 0xca1))}
	for _, rc := range runs {
		f := sim.Factory{Name: "calibration", New: func(env *sim.Env) (sim.Policy, error) {
			sc, err := m.NewScorer()
			if err != nil {
				return nil, err
			}
			var enc string
			if m.Sage != nil {
				enc = m.Sage.ID()
			}
			if err := policy.CheckPartners(env, sc, enc); err != nil {
				return nil, err
			}
			rec.inner, rec.affinity = sc, enc
			return policy.NewLearnedScorer("calibration", rec, m.Decision, env), nil
		}}
		if _, err := engine.Run(ctx, env, f, rc); err != nil {
			return nil, 0, err
		}
	}
	return rec.rows, rec.seen, nil
}

// ConstantFeatures returns the names of the features that take one value
// on every calibration row (rows of policy.NumFeatures, as CollectRows
// returns them). Their int8 input scale is fitted to that one value, so
// the int8 model clamps them near it: a model quantized on openb states,
// which have no service dependencies, loses its co-location and RTT
// features. Calibrate on states that exercise every feature the model
// will meet.
func ConstantFeatures(rows []float32) []string {
	const F = policy.NumFeatures
	if len(rows) < F {
		return nil
	}
	names := policy.NewSchema().Names
	var out []string
	for j := range F {
		first, same := rows[j], true
		for i := j + F; i < len(rows) && same; i += F {
			same = rows[i] == first
		}
		if same {
			out = append(out, names[j])
		}
	}
	return out
}
