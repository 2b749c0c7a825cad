package nn

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
)

// TestNewNetExcludingMatchesNarrowNet: a network that leaves out its last
// inputs starts from the weights of a network without those inputs (the
// same draws, the same He scale over the inputs it reads), with zero
// first-layer rows for the left-out ones; MaskInputs keeps them there.
func TestNewNetExcludingMatchesNarrowNet(t *testing.T) {
	const f, left = 10, 3
	exclude := make([]bool, f)
	for i := f - left; i < f; i++ {
		exclude[i] = true
	}
	wide, err := NewNetExcluding(f, 6, 5, 4, rand.New(rand.NewPCG(7, 7)), exclude)
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := NewNet(f-left, 6, 5, 4, rand.New(rand.NewPCG(7, 7)))
	if err != nil {
		t.Fatal(err)
	}
	w, n := f32(wide.W1), f32(narrow.W1)
	if !slices.Equal(w[:len(n)], n) {
		t.Fatalf("first-layer rows of the inputs read differ from the narrow network's")
	}
	for i := range f {
		if got, want := wide.ReadsInput(i), !exclude[i]; got != want {
			t.Errorf("ReadsInput(%d) = %v, want %v", i, got, want)
		}
	}
	wp, np := wide.Params(), narrow.Params()
	for i := 1; i < len(wp); i++ {
		if !slices.Equal(wp[i].Values(), np[i].Values()) {
			t.Errorf("parameter %s differs from the narrow network's", wp[i].Name)
		}
	}
	g := wide.Clone()
	for i := range f32(g.W1) {
		f32(g.W1)[i] = 1
	}
	g.MaskInputs(exclude)
	for i := range f {
		if g.ReadsInput(i) == exclude[i] {
			t.Errorf("after MaskInputs, ReadsInput(%d) = %v", i, g.ReadsInput(i))
		}
	}
	if _, err := NewNetExcluding(f, 6, 5, 4, nil, make([]bool, f-1)); !errors.Is(err, policy.ErrShape) {
		t.Errorf("a mask of the wrong length: %v, want policy.ErrShape", err)
	}
}
