package sage

import (
	"context"
	"errors"
	"github.com/edgesched/edgesched/policy"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestDefaultIsPretrained: the shipped file is what
// DefaultPretrainConfig trains on TrainingGraphs, bit for bit (on amd64
// below v3, where no multiply-add is fused); SAGE_WRITE_DEFAULT=1
// writes it.
func TestDefaultIsPretrained(t *testing.T) {
	if !pretrainExact {
		t.Skipf("pretraining reproduces the shipped encoder bit for bit on amd64 below GOAMD64=v3 only (fused multiply-adds elsewhere); this is %s", runtime.GOARCH)
	}
	gs, err := TrainingGraphs()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Pretrain(context.Background(), gs, DefaultPretrainConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodePretrained(p)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SAGE_WRITE_DEFAULT") == "1" {
		if err := os.WriteFile(defaultPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes, encoder and decoder %s)", defaultPath, len(b), p.ID())
		return
	}
	if string(b) != string(defaultFile(t)) {
		t.Fatalf("%s is not what pretraining computes: SAGE_WRITE_DEFAULT=1 go test -run TestDefaultIsPretrained ./policy/sage rewrites it (and new weights need a new policy.AffinityEncoder)", defaultPath)
	}
	d, err := Default()
	if err != nil || d.ID() != p.ID() || p.ID() != policy.AffinityEncoder {
		t.Fatalf("Default: %v, weights %v; pretrained %s, policy.AffinityEncoder %s", err, d, p.ID(), policy.AffinityEncoder)
	}
}

// defaultPath is the shipped weights' file (policy.DefaultSage).
const defaultPath = "../sage-default.json"

func defaultFile(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(defaultPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodePretrainedRefuses: damaged files are refused with
// ErrPretrained, naming the problem.
func TestDecodePretrainedRefuses(t *testing.T) {
	good := string(defaultFile(t))
	for name, c := range map[string]struct{ in, want string }{
		"empty":           {"", "EOF"},
		"not JSON":        {"{", "unexpected EOF"},
		"unknown key":     {strings.Replace(good, `"scale"`, `"scales"`, 1), "unknown field"},
		"format":          {strings.Replace(good, `"format":1`, `"format":2`, 1), "format 2"},
		"layers":          {strings.Replace(good, `"layers":2`, `"layers":3`, 1), "layers"},
		"extra parameter": {strings.Replace(good, `"params":[[`, `"params":[[1],[`, 1), "5 parameters"},
		"trailing":        {good + "{}", "trailing"},
		"too large":       {strings.Repeat(" ", maxPretrainedBytes+1), "at most"},
		"zero scale":      {strings.Replace(good, `"scale":5`, `"scale":0`, 1), "scale 0"},
	} {
		_, err := DecodePretrained([]byte(c.in))
		if !errors.Is(err, ErrPretrained) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrPretrained naming %q", name, err, c.want)
		}
	}
}

// FuzzDecodePretrained: no input panics; what decodes encodes to a file
// that decodes to the same encoder.
func FuzzDecodePretrained(f *testing.F) {
	f.Add(defaultFile(f))
	f.Add([]byte(`{"format":1,"encoder":{"hidden":1,"dim":1,"layers":1,"fanouts":[1],"seed":1},"params":[[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],[0]],"decoder":null,"scale":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePretrained(b)
		if err != nil {
			if !errors.Is(err, ErrPretrained) {
				t.Fatalf("error without ErrPretrained: %v", err)
			}
			return
		}
		again, err := EncodePretrained(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodePretrained(again)
		if err != nil || q.ID() != p.ID() {
			t.Fatalf("round trip: %v", err)
		}
	})
}
