package sanity

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// TestCheckSanity: a quantized random model and its float artifact pass;
// the same int8 artifact with input scales of 1e30 (every input quantizes
// to 0: all rows tie) or an output scale of 3e38 (scores overflow to
// +-Inf), and a float model whose output weights are 3e38, are refused
// with ErrInsane naming the problem. SanityRows is deterministic.
func TestCheckSanity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	net, err := nn.NewNet(policy.NumFeatures, 16, 16, 16, rng)
	if err != nil {
		t.Fatal(err)
	}
	m := &nn.Model{Schema: policy.NewSchema(), Net: net}
	for i := range m.Schema.Mean {
		m.Schema.Mean[i] = float32(0.2 * rng.NormFloat64())
		m.Schema.Std[i] = float32(0.5 + rng.Float64())
	}
	a, err := quant.Quantize(m.Float(), Rows(m.Schema, 300), quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckArtifact(a); err != nil {
		t.Fatalf("a sane int8 model: %v", err)
	}
	fa, err := quant.FromModel(m.Float(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckArtifact(fa); err != nil {
		t.Fatalf("a sane float model: %v", err)
	}
	withTensor := func(a *quant.Artifact, name string, v float32) *quant.Artifact {
		c := &quant.Artifact{Header: a.Header}
		for _, tn := range a.Tensors {
			x := tn
			x.F32 = append([]float32(nil), tn.F32...)
			if x.Name == name {
				for i := range x.F32 {
					x.F32[i] = v
				}
			}
			c.Tensors = append(c.Tensors, x)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		a    *quant.Artifact
		want string
	}{
		{"int8 input scales 1e30", withTensor(a, "in_scale", 1e30), "same score"},
		{"int8 output scale 3e38", withTensor(a, "w3_scale", 3e38), "not a finite float32"},
		{"float output weights 3e38", withTensor(fa, "w3", 3e38), "not a finite float32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckArtifact(tc.a)
			if !errors.Is(err, ErrInsane) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrInsane naming %q", err, tc.want)
			}
		})
	}
	r1, r2 := Rows(m.Schema, 10), Rows(m.Schema, 10)
	for i := range r1 {
		if math.Float32bits(r1[i]) != math.Float32bits(r2[i]) {
			t.Fatal("SanityRows differs between calls")
		}
	}
	if err := Check(a, r1[:5]); !errors.Is(err, ErrInsane) {
		t.Fatalf("rows not a multiple of the features: %v", err)
	}
}
