package apps

import (
	"errors"
	"strings"
	"testing"
)

// TestSyntheticShapes: each shape has the documented edges (counted here
// from the YAML), and bad specs are refused. Decoding and the library's
// structure are tested in sim/scenario (TestLibraryApps).
func TestSyntheticShapes(t *testing.T) {
	cases := []struct {
		shape string
		n     int
		edges func(n int) (lo, hi int)
	}{
		{Chain, 10, func(n int) (int, int) { return n - 1, n - 1 }},
		{FanOut, 10, func(n int) (int, int) { return n - 1, n - 1 }},
		{Tree, 10, func(n int) (int, int) { return n - 1, n - 1 }},
		// s0 -> each non-hub, s0 -> the first hub, each non-hub -> 1..hubs hubs
		{Hubs, 12, func(n int) (int, int) { h := n / 6; return 2*(n-1-h) + 1, (n-1-h)*(1+h) + 1 }},
	}
	for _, c := range cases {
		b, err := Synthetic(Spec{Shape: c.shape, Services: c.n, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Count(string(b), "callsPerSecond:")
		lo, hi := c.edges(c.n)
		if got < lo || got > hi || strings.Count(string(b), "- name: s") != c.n {
			t.Errorf("%s: %d edges, want %d..%d\n%s", c.shape, got, lo, hi, b)
		}
		if r, err := Requests(b); err != nil || r <= 0 {
			t.Errorf("%s: requests %d, %v", c.shape, r, err)
		}
	}
	for _, s := range []Spec{{Shape: "ring", Services: 5}, {Shape: Chain, Services: 1}, {Shape: Chain, Services: 501}, {Shape: Chain, Services: 5, Rate: -1}} {
		if _, err := Synthetic(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", s, err)
		}
	}
	if _, err := Source("nosuch"); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown app: %v", err)
	}
	if HeldOut("online-boutique") || !HeldOut("train-ticket") || !HeldOut("synthetic") {
		t.Error("roles")
	}
}
