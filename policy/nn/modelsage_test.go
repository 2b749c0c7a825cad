package nn

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
)

// sageModel is a small random model; with own, it carries GraphSAGE
// weights of its own (the shipped ones, one decoder value moved).
func sageModel(t *testing.T, own bool) *Model {
	t.Helper()
	net, err := NewNet(policy.NumFeatures, 8, 4, 4, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{Schema: policy.NewSchema(), Net: net}
	if own {
		m.Sage = policy.DefaultSage()
		m.Sage.Decoder[0] += 0.5
	}
	return m
}

// TestModelFlatCoversSage: a federated update's vector is the network's
// parameters then the model's own GraphSAGE weights (encoder, then
// decoder); AddFlat moves both by scale times the delta; a model without
// weights of its own keeps the network's vector as it always was.
func TestModelFlatCoversSage(t *testing.T) {
	plain, own := sageModel(t, false), sageModel(t, true)
	if n := plain.NumParams(); n != plain.Net.NumParams() || len(plain.Flat()) != n {
		t.Fatalf("without GraphSAGE weights: %d values, the network has %d", n, plain.Net.NumParams())
	}
	k, s := own.Net.NumParams(), own.Sage.NumParams()
	// 2 layers: W1 20x32, B1 32, W2 64x16, B2 16, decoder 16x16
	if s != 20*32+32+64*16+16+16*16 || own.NumParams() != k+s {
		t.Fatalf("%d GraphSAGE values, %d in all; want 1968, %d", s, own.NumParams(), k+1968)
	}
	before := own.Clone()
	delta := make([]float32, own.NumParams())
	for i := range delta {
		delta[i] = float32(i%7) - 3
	}
	if err := own.AddFlat(delta, 0.5); err != nil {
		t.Fatal(err)
	}
	a, b := before.Flat(), own.Flat()
	for i := range a {
		if b[i] != a[i]+0.5*delta[i] {
			t.Fatalf("value %d: %v, want %v + 0.5 * %v", i, b[i], a[i], delta[i])
		}
	}
	if own.Sage.ID() == before.Sage.ID() || before.Sage.Params[0][0] != a[k] {
		t.Fatal("the update did not move the GraphSAGE weights, or Clone shares them")
	}
	if err := own.AddFlat(delta[:k], 1); err == nil {
		t.Fatal("a delta of the network's size alone was taken")
	}
}

// TestModelFileSage: a model file keeps the model's GraphSAGE weights; a
// file without them reads the shipped pair's partners when its network
// reads dep_affinity (without carrying them: its federated updates are
// the network's), and none when it does not.
func TestModelFileSage(t *testing.T) {
	read := func(m *Model) *Model {
		var buf bytes.Buffer
		if err := Encode(&buf, m, "model", nil, nil); err != nil {
			t.Fatal(err)
		}
		d, err := Decode(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return d.Model
	}
	own := sageModel(t, true)
	if got := read(own); got.Sage == nil || got.Sage.ID() != own.Sage.ID() || !slices.Equal(got.Flat(), own.Flat()) {
		t.Fatalf("own weights after a file round trip: %v", got.Sage)
	}
	plain := sageModel(t, false) // random: reads every input
	if got := read(plain); got.Sage != nil || got.AffinityEncoder() != policy.AffinityEncoder || got.NumParams() != got.Net.NumParams() {
		t.Fatalf("a file without weights, reading dep_affinity: %v, %s", got.Sage, got.AffinityEncoder())
	}
	plain.Net.MaskInputs(func() []bool { m := make([]bool, policy.NumFeatures); m[policy.AffinityFeature] = true; return m }())
	if got := read(plain); got.Sage != nil || got.AffinityEncoder() != "" {
		t.Fatalf("a file not reading dep_affinity: %v", got.Sage)
	}
	// the float form carries the model's own weights only
	if f := sageModel(t, false).Float(); f.Sage != nil {
		t.Fatal("Float attached weights the model does not carry")
	}
	if f := own.Float(); f.Sage == nil || f.Sage.ID() != own.Sage.ID() {
		t.Fatal("Float lost the model's own weights")
	}
}
