package int8net_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgesched/edgesched/internal/testutil/modeltest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	. "github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/quant/sanity"
)

// fuzzRows are candidate rows to score: calibration-like rows, then rows
// at the extremes of every input (each held at its input bound).
func fuzzRows() []float32 {
	rows := modeltest.Rows(9, 7)
	for _, x := range []float32{1e30, -1e30} {
		for range 2 {
			for range policy.NumFeatures {
				rows = append(rows, x)
			}
			x = -x
		}
	}
	// corners of the inputs' box with mixed signs (seeded): a network's
	// highest score is at one of them, rarely at the all-equal ones
	r := rand.New(rand.NewPCG(7, 7))
	for range 64 {
		for range policy.NumFeatures {
			rows = append(rows, float32(1e30*(2*float64(r.IntN(2))-1)))
		}
	}
	return rows
}

// FuzzNew: no int8 artifact quant.Decode accepts makes New, or a Scorer
// of the Net it builds, panic. New refuses (wrapping quant.ErrArtifact or
// quant.ErrQuant) or builds a Net of the artifact's shape; when the
// sanity check passes it too (sanity.CheckArtifact, which the scheduler's
// ModelStore, the agents and the coordinator run after New), every kernel
// scores any candidate row, calibration-like or at the inputs' extremes,
// finite. This is the loaders' path after the signature check: quant's
// FuzzDecode covers the bytes, this the int8 weights and scales they
// carry. Since an artifact's model ID covers its tensors,
// mutated bytes rarely decode: the fuzzer instead edits the tensors of a
// real artifact (7 bytes an edit: tensor, element, value bits), which is
// then encoded (a fresh model ID) and decoded again as a loader would.
// Seeded with real unsigned int8 artifacts (quant.Quantize of random
// models of several widths, one with a decision rule and its own
// GraphSAGE weights).
func FuzzNew(f *testing.F) {
	var seeds [][]byte
	for i, hw := range [][2]int{{8, 4}, {16, 8}, {32, 16}} {
		m := modeltest.Random(f, hw[0], hw[1], uint64(i+1))
		if i == 2 {
			w := policy.DefaultSage()
			w.Decoder[3] += 0.25
			m.Decision, m.Sage = policy.Decision{Band: 4}, w
		}
		a, err := quant.Quantize(m.Float(), modeltest.Rows(500, uint64(i+1)), quant.DefaultCalibration(), quant.Info{})
		if err != nil {
			f.Fatal(err)
		}
		b, err := a.Encode(nil)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
		f.Add(uint8(i), []byte{})
	}
	f.Add(uint8(0), []byte{1, 0, 0, 0x7f, 0, 0, 0})          // a weight of w1 at 127
	f.Add(uint8(1), []byte{0, 0, 0, 0x7f, 0x80, 0, 0})       // an input scale of +Inf
	f.Add(uint8(1), []byte{2, 0, 3, 0x7f, 0xff, 0xff, 0xff}) // a large bias
	rows := fuzzRows()
	k := len(rows) / policy.NumFeatures
	f.Fuzz(func(t *testing.T, seed uint8, patch []byte) {
		a, err := quant.Decode(seeds[int(seed)%len(seeds)], quant.DecodeOptions{AllowUnsigned: true})
		if err != nil {
			t.Fatal(err)
		}
		for ; len(patch) >= 7; patch = patch[7:] {
			tn := &a.Tensors[int(patch[0])%len(a.Tensors)]
			i := int(binary.BigEndian.Uint16(patch[1:]))
			v := binary.BigEndian.Uint32(patch[3:])
			switch {
			case len(tn.F32) > 0:
				tn.F32[i%len(tn.F32)] = math.Float32frombits(v)
			case len(tn.I8) > 0:
				tn.I8[i%len(tn.I8)] = int8(v)
			case len(tn.I32) > 0:
				tn.I32[i%len(tn.I32)] = int32(v)
			}
		}
		b, err := a.Encode(nil)
		if err != nil {
			return
		}
		if a, err = quant.Decode(b, quant.DecodeOptions{AllowUnsigned: true}); err != nil {
			return // quant's FuzzDecode holds the decoder's refusals
		}
		n, err := New(a)
		if err != nil {
			if n != nil || !errors.Is(err, quant.ErrArtifact) && !errors.Is(err, quant.ErrQuant) {
				t.Fatalf("refusal %v does not wrap ErrArtifact or ErrQuant, or returned a net", err)
			}
			return
		}
		l := a.Header.Layers
		if n.F != l.F || n.H1 != l.H1 || n.H2 != l.H2 || n.F != policy.NumFeatures {
			t.Fatalf("net %dx%dx%d of a %+v artifact", n.F, n.H1, n.H2, l)
		}
		for i := range n.F + 1 {
			n.ReadsInput(i)
		}
		insane := sanity.CheckArtifact(a)
		if insane != nil && !errors.Is(insane, sanity.ErrInsane) {
			t.Fatalf("sanity refusal %v does not wrap ErrInsane", insane)
		}
		out := make([]float32, k)
		for _, kernel := range Kernels() {
			s, err := n.ScorerWith(kernel)
			if err != nil {
				t.Fatalf("kernel %s: %v", kernel, err)
			}
			if err := s.Scores(rows, k, out); err != nil {
				t.Fatalf("kernel %s: %v", kernel, err)
			}
			for i, v := range out {
				if insane == nil && (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) {
					t.Fatalf("kernel %s: candidate %d scores %v, and the model passed the sanity check", kernel, i, v)
				}
			}
		}
	})
}

// maxAbsScore is the largest |score| New's scorer gives rows.
func maxAbsScore(t *testing.T, a *quant.Artifact, rows []float32) float64 {
	t.Helper()
	n, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(rows)/policy.NumFeatures)
	if err := n.Scorer().Scores(rows, len(out), out); err != nil {
		t.Fatal(err)
	}
	m := 0.0
	for _, v := range out {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// TestOverflowingOutputRefused: an artifact whose output accumulator
// could overflow int32 (a bias near the limit: b3 + a2·w3 would wrap to a
// wrong, finite score no calibration row reveals) is refused by New,
// wrapping quant.ErrQuant, and so by every loader. One whose output scale
// keeps the calibration rows' scores finite but takes a row at the
// inputs' extremes to +Inf (the sanity check scored calibration rows
// only, and passed it) is refused by the sanity check the loaders run
// after New. The artifact Quantize made passes both.
func TestOverflowingOutputRefused(t *testing.T) {
	a, err := quant.Quantize(modeltest.Random(t, 16, 8, 3).Float(), modeltest.Rows(500, 3), quant.DefaultCalibration(), quant.Info{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	calib := sanity.Rows(a.Schema(), 256)
	probe := maxAbsScore(t, a, calib)
	for _, tc := range []struct {
		name        string
		edit        func(a *quant.Artifact)
		new, sanity error
	}{
		{"as made", func(*quant.Artifact) {}, nil, nil},
		{"a bias at the int32 limit", func(a *quant.Artifact) { a.Tensor("b3").I32[0] = math.MaxInt32 - 1 }, quant.ErrQuant, sanity.ErrInsane},
		{"an output scale past float32 beyond the calibration rows", func(a *quant.Artifact) {
			s := a.Tensor("w3_scale").F32
			s[0] = float32(float64(s[0]) * math.MaxFloat32 * 0.95 / probe)
		}, nil, sanity.ErrInsane},
	} {
		c, err := quant.Decode(b, quant.DecodeOptions{AllowUnsigned: true})
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(c)
		raw, err := c.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		if c, err = quant.Decode(raw, quant.DecodeOptions{AllowUnsigned: true}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := New(c); tc.new == nil && err != nil || tc.new != nil && !errors.Is(err, tc.new) {
			t.Errorf("%s: New = %v, want %v", tc.name, err, tc.new)
		}
		if tc.new == nil && tc.sanity != nil {
			if m := maxAbsScore(t, c, calib); math.IsInf(m, 0) || !math.IsInf(maxAbsScore(t, c, fuzzRows()), 0) {
				t.Fatalf("%s: calibration rows score up to %v, extreme rows finite: the case tests nothing", tc.name, m)
			}
		}
		if err := sanity.CheckArtifact(c); tc.sanity == nil && err != nil || tc.sanity != nil && !errors.Is(err, tc.sanity) {
			t.Errorf("%s: sanity = %v, want %v", tc.name, err, tc.sanity)
		}
	}
}
