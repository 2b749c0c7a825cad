package policy

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestSageWeights: the shipped pair validates under AffinityEncoder; the
// encoder alone keeps the ID embeddings without partners were always
// published under; Clone is deep; Flat and AddFlat agree on the layout;
// a wrong shape is refused naming it.
func TestSageWeights(t *testing.T) {
	w := DefaultSage()
	if err := w.Validate(); err != nil || w.ID() != AffinityEncoder {
		t.Fatalf("the shipped pair: %v, ID %s, want %s", err, w.ID(), AffinityEncoder)
	}
	enc := w.Clone()
	enc.Decoder, enc.Scale = nil, 0
	// the ID of policy/sage's Encoder.ID before the pair had one (issue 19)
	if id := enc.ID(); id != "sage-480c2a7017345668" {
		t.Fatalf("the encoder alone: %s, want sage-480c2a7017345668", id)
	}
	c := w.Clone()
	c.Params[0][0]++
	if w.Params[0][0] == c.Params[0][0] || w.ID() == c.ID() {
		t.Fatal("Clone shares the parameters, or the ID ignores them")
	}
	flat := w.Flat(nil)
	if len(flat) != w.NumParams() || flat[len(flat)-1] != w.Decoder[len(w.Decoder)-1] || flat[0] != w.Params[0][0] {
		t.Fatalf("Flat: %d values, want %d, encoder first and decoder last", len(flat), w.NumParams())
	}
	one := make([]float32, w.NumParams())
	for i := range one {
		one[i] = 1
	}
	if err := c.AddFlat(one, 2); err != nil || c.Decoder[0] != w.Decoder[0]+2 || c.Params[1][0] != w.Params[1][0]+2 {
		t.Fatalf("AddFlat: %v", err)
	}
	if err := c.AddFlat(one[1:], 1); !errors.Is(err, ErrShape) {
		t.Fatalf("a short delta: %v, want ErrShape", err)
	}
	for name, c := range map[string]struct {
		edit func(w *SageWeights)
		want string
	}{
		"three layers":   {func(w *SageWeights) { w.Layers = 3 }, "3 layers"},
		"fan-outs":       {func(w *SageWeights) { w.Fanouts = w.Fanouts[:1] }, "1 fan-outs"},
		"zero fan-out":   {func(w *SageWeights) { w.Fanouts[1] = 0 }, "fan-out 0"},
		"short weights":  {func(w *SageWeights) { w.Params[2] = w.Params[2][1:] }, "parameter 3"},
		"decoder size":   {func(w *SageWeights) { w.Decoder = w.Decoder[1:] }, "decoder of 255"},
		"not finite":     {func(w *SageWeights) { w.Params[0][3] = float32(inf()) }, "finite"},
		"negative scale": {func(w *SageWeights) { w.Scale = -1 }, "scale -1"},
	} {
		bad := DefaultSage()
		c.edit(bad)
		if err := bad.Validate(); !errors.Is(err, ErrSage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrSage naming %q", name, err, c.want)
		}
	}
}

func inf() float64 { return math.Inf(1) }
