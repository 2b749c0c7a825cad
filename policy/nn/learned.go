package nn

import (
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim"
)

// FloatScorer is the float32 network as a Scorer: it normalises with the
// model's schema and runs the actor (Net.Scores).
type FloatScorer struct {
	m   *Model
	buf []float32
}

// NewFloatScorer returns a scorer over a private copy of m's network.
func NewFloatScorer(m *Model) (*FloatScorer, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &FloatScorer{m: &Model{Schema: m.Schema, Net: m.Net.Clone(), Meta: m.Meta, Decision: m.Decision}}, nil
}

// ReadsInput implements policy.InputReader.
func (f *FloatScorer) ReadsInput(i int) bool { return f.m.Net.ReadsInput(i) }

// Scores implements policy.Scorer.
func (f *FloatScorer) Scores(raw []float32, k int, out []float32) error {
	x := grow(&f.buf, len(raw))
	copy(x, raw)
	for i := 0; i+policy.NumFeatures <= len(x); i += policy.NumFeatures {
		f.m.Schema.Normalize(x[i : i+policy.NumFeatures])
	}
	s, err := f.m.Net.Scores(x, k)
	if err != nil {
		return err
	}
	copy(out, s)
	return nil
}

// Factory returns a simulator factory for a model under a display name.
func Factory(name string, m *Model) sim.Factory {
	return sim.Factory{Name: name, New: func(env *sim.Env) (sim.Policy, error) { return NewLearned(name, m, env) }}
}

// NewLearned returns a learned policy for one run on env. The model is
// only read; each run gets its own network copy, so runs may share a Model.
func NewLearned(name string, m *Model, env *sim.Env) (*policy.Learned, error) {
	sc, err := NewFloatScorer(m)
	if err != nil {
		return nil, err
	}
	return policy.NewLearnedScorer(name, sc, m.Decision, env), nil
}
