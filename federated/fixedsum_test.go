package federated

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/quant/esu"
)

// fixedUpdate is an encoded update of random values (standard deviation
// sd) and its decoded values and norm.
type fixedUpdate struct {
	payload []byte
	values  []float32
	norm    float64
	weight  float64
	stale   int
}

func fixedUpdates(t testing.TB, n, dim int, sd float64, enc esu.Encoding, seed uint64) []fixedUpdate {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	base := strings.Repeat("ab", 32)
	out := make([]fixedUpdate, n)
	for i := range out {
		v := make([]float32, dim)
		s := sd * math.Exp(rng.NormFloat64()) // updates of different sizes
		for j := range v {
			v[j] = float32(s * rng.NormFloat64())
		}
		opt := esu.DefaultOptions(seed<<20 | uint64(i))
		opt.Encoding = enc
		if enc == esu.Int8 {
			opt.ChunkSize = 1 + rng.IntN(700) // chunks that straddle the stripes
		}
		b, err := esu.Encode(&esu.Update{Base: base, Values: v}, opt)
		if err != nil {
			t.Fatal(err)
		}
		u, err := esu.Decode(b, dim)
		if err != nil {
			t.Fatal(err)
		}
		info, err := esu.Check(b, dim)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = fixedUpdate{payload: b, values: u.Values, norm: info.Norm, weight: float64(1 + rng.IntN(5000)), stale: rng.IntN(4)}
	}
	return out
}

// addFixed adds us to s in the given order, in groups of group (each
// group's coordinates added on workers goroutines), clipping to clip.
func addFixed(t testing.TB, s *FixedSum, us []fixedUpdate, order []int, group, workers int, clip float64) {
	t.Helper()
	var terms []FixedTerm
	for _, i := range order {
		u := us[i]
		v, err := esu.ViewOf(u.payload, len(s.Hi))
		if err != nil {
			t.Fatal(err)
		}
		f := 1.0
		if clip > 0 && u.norm > clip {
			f = clip / u.norm
		}
		term, err := s.Prepare(v, u.weight*f, u.norm)
		if err != nil {
			t.Fatal(err)
		}
		s.AddWeight(u.weight, u.weight, u.stale)
		terms = append(terms, term)
		if len(terms) == group {
			s.Add(terms, workers)
			terms = terms[:0]
		}
	}
	s.Add(terms, workers)
}

// TestFixedSumOrderIndependent: the sums, and so the mean, are
// bit-identical whatever the order of the updates, however they are
// grouped and on however many workers they are added (int8 updates with
// chunk sizes that straddle the workers' stripes, and float32 ones); a
// float64 running sum (meanAggregator) depends on the order.
func TestFixedSumOrderIndependent(t *testing.T) {
	const n, dim = 40, 9000
	for _, enc := range []esu.Encoding{esu.Int8, esu.Float32} {
		us := fixedUpdates(t, n, dim, 0.01, enc, 1)
		shift, wshift, ok := FixedShifts(n, 5000, 10)
		if !ok {
			t.Fatal("default-like bounds refused")
		}
		var ref Result
		var refSum *FixedSum
		for k, run := range []struct{ group, workers int }{{1, 1}, {7, 2}, {40, 3}, {3, 0}} {
			order := make([]int, n)
			for i := range order {
				order[i] = i
			}
			if k > 0 {
				rand.New(rand.NewPCG(uint64(k), 9)).Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			s := NewFixedSum(dim, shift, wshift, 5000*10)
			addFixed(t, s, us, order, run.group, run.workers, 10)
			res, err := s.Result(RuleFedAvg)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				ref, refSum = res, s
				continue
			}
			for i := range s.Hi {
				if s.Hi[i] != refSum.Hi[i] || s.Lo[i] != refSum.Lo[i] {
					t.Fatalf("%v, order %d (groups of %d, %d workers): sum %d is %d:%d, in order %d:%d", enc, k, run.group, run.workers, i, s.Hi[i], s.Lo[i], refSum.Hi[i], refSum.Lo[i])
				}
			}
			for i := range res.Delta {
				if math.Float32bits(res.Delta[i]) != math.Float32bits(ref.Delta[i]) {
					t.Fatalf("%v, order %d (groups of %d, %d workers): coordinate %d is %v, in order %v", enc, k, run.group, run.workers, i, res.Delta[i], ref.Delta[i])
				}
			}
			if res.Stats["weight_total"] != ref.Stats["weight_total"] {
				t.Fatalf("weight totals %v and %v", res.Stats["weight_total"], ref.Stats["weight_total"])
			}
		}
	}
}

// TestFixedSumMatchesFedAvg: the fixed-point mean agrees with FedAvg's
// float64 running sum over the decoded (and clipped) values to float32
// precision, for fedavg and fedbuff (staleness discount), and reports the
// same statistics.
func TestFixedSumMatchesFedAvg(t *testing.T) {
	const n, dim = 30, 5000
	us := fixedUpdates(t, n, dim, 0.5, esu.Int8, 2)
	const clip = 3
	for _, rule := range []string{RuleFedAvg, RuleFedBuff} {
		cfg := DefaultAggregatorConfig()
		cfg.Rule = rule
		agg := newAgg(t, cfg, dim)
		shift, wshift, _ := FixedShifts(n, 5000, clip)
		s := NewFixedSum(dim, shift, wshift, 5000*clip)
		for _, u := range us {
			d := append([]float32(nil), u.values...)
			ClipL2(d, clip)
			addAll(t, agg, Contribution{Site: "s", Delta: d, Weight: u.weight, Staleness: u.stale})
			v, err := esu.ViewOf(u.payload, dim)
			if err != nil {
				t.Fatal(err)
			}
			w := u.weight
			if rule == RuleFedBuff {
				w *= math.Pow(1+float64(u.stale), -cfg.StalenessExponent)
			}
			f := 1.0
			if u.norm > clip {
				f = clip / u.norm
			}
			term, err := s.Prepare(v, w*f, u.norm)
			if err != nil {
				t.Fatal(err)
			}
			s.Add([]FixedTerm{term}, 2)
			s.AddWeight(w, u.weight, u.stale)
		}
		want, got := result(t, agg), func() Result { r, err := s.Result(rule); must(t, err); return r }()
		var maxAbs float64
		for _, v := range want.Delta {
			maxAbs = max(maxAbs, math.Abs(float64(v)))
		}
		for i := range want.Delta {
			if d := math.Abs(float64(got.Delta[i] - want.Delta[i])); d > 1e-6*maxAbs {
				t.Fatalf("%s: coordinate %d: %v, float64 FedAvg %v", rule, i, got.Delta[i], want.Delta[i])
			}
		}
		for k, v := range want.Stats {
			if !near(got.Stats[k], v, 1e-12) {
				t.Errorf("%s: stat %s = %v, want %v", rule, k, got.Stats[k], v)
			}
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFixedSumExactCancellation: two float32 updates that are each
// other's negation cancel exactly, and equal updates average to
// themselves bit for bit (every term above the resolution is exact).
func TestFixedSumExactCancellation(t *testing.T) {
	const dim = 1000
	us := fixedUpdates(t, 1, dim, 0.1, esu.Float32, 3)
	neg := make([]float32, dim)
	for i, v := range us[0].values {
		neg[i] = -v
	}
	opt := esu.DefaultOptions(1)
	opt.Encoding = esu.Float32
	b, err := esu.Encode(&esu.Update{Base: strings.Repeat("ab", 32), Values: neg}, opt)
	must(t, err)
	shift, wshift, _ := FixedShifts(3, 1e8, 10)
	add := func(s *FixedSum, payload []byte, w float64) {
		v, err := esu.ViewOf(payload, dim)
		must(t, err)
		term, err := s.Prepare(v, w, us[0].norm)
		must(t, err)
		s.Add([]FixedTerm{term}, 1)
		s.AddWeight(w, w, 0)
	}
	s := NewFixedSum(dim, shift, wshift, 1e9)
	add(s, us[0].payload, 10)
	add(s, b, 10)
	for i := range s.Hi {
		if s.Hi[i] != 0 || s.Lo[i] != 0 {
			t.Fatalf("coordinate %d: %d:%d after adding a delta and its negation", i, s.Hi[i], s.Lo[i])
		}
	}
	s = NewFixedSum(dim, shift, wshift, 1e9)
	add(s, us[0].payload, 10)
	add(s, us[0].payload, 10)
	add(s, us[0].payload, 10)
	res, err := s.Result(RuleFedAvg)
	must(t, err)
	for i, v := range res.Delta {
		if v != us[0].values[i] {
			t.Fatalf("coordinate %d: mean of three equal updates %v, want %v", i, v, us[0].values[i])
		}
	}
}

// TestFixedSumBounds: FixedShifts refuses missing or too loose bounds;
// Prepare refuses an update whose weight times norm, or one of whose
// chunk scales, exceeds the bound the shifts were made for, and one of
// another size.
func TestFixedSumBounds(t *testing.T) {
	for _, b := range []struct {
		n         int
		w, maxAbs float64
	}{{0, 1, 1}, {10, 0, 1}, {10, 1, 0}, {10, math.Inf(1), 1}, {10, 1, math.NaN()}, {1000, 1e18, 1e6}} {
		if _, _, ok := FixedShifts(b.n, b.w, b.maxAbs); ok {
			t.Errorf("FixedShifts(%d, %v, %v) accepted", b.n, b.w, b.maxAbs)
		}
	}
	shift, wshift, ok := FixedShifts(1000, 1e8, 10)
	if !ok || shift != 84 || wshift != 87 {
		t.Fatalf("default bounds: shifts %d/%d %v, want 84/87", shift, wshift, ok)
	}
	const dim = 600
	us := fixedUpdates(t, 1, dim, 1, esu.Int8, 4)
	s := NewFixedSum(dim, shift, wshift, 1e9)
	v, _ := esu.ViewOf(us[0].payload, dim)
	if _, err := s.Prepare(v, 1e9, us[0].norm); !errors.Is(err, ErrContribution) {
		t.Errorf("weight 1e9 times norm %v: %v, want ErrContribution", us[0].norm, err)
	}
	// a hostile encoding: a huge scale whose values are all 0 (norm 0)
	huge := fixedUpdates(t, 1, dim, 1, esu.Int8, 5)[0].payload
	hv, _ := esu.ViewOf(huge, dim)
	_, q := hv.Int8Chunk(0)
	clear(q)
	// (the view aliases the payload: chunk 0's values are now 0; its
	// scale becomes 1e30 and the CRC is made again)
	binary.LittleEndian.PutUint32(huge[44:], math.Float32bits(1e30)) // after the 44-byte header
	binary.LittleEndian.PutUint32(huge[len(huge)-4:], crc32.ChecksumIEEE(huge[:len(huge)-4]))
	info, err := esu.Check(huge, dim)
	must(t, err)
	hv, err = esu.ViewOf(huge, dim)
	must(t, err)
	if _, err := s.Prepare(hv, 100, info.Norm); !errors.Is(err, ErrContribution) {
		t.Errorf("a chunk scale of 1e30 with zero values (norm %v): %v, want ErrContribution", info.Norm, err)
	}
	small := fixedUpdates(t, 1, dim-1, 1, esu.Int8, 6)[0].payload
	sv, _ := esu.ViewOf(small, dim)
	if _, err := s.Prepare(sv, 1, 1); !errors.Is(err, ErrContribution) {
		t.Errorf("an update of %d values for %d coordinates: %v", dim-1, dim, err)
	}
	if _, err := s.Result(RuleFedAvg); !errors.Is(err, ErrAggregate) {
		t.Errorf("result of empty sums: %v, want ErrAggregate", err)
	}
}

// TestFixedSumExact: the 128-bit sums equal the exact sums of the terms
// (each term's multiplier times 2^Shift, times its int8 value, or each
// float32 value's product times 2^Shift), computed with math/big — with a
// shift small enough that terms straddle the two words and carry, and
// values of both signs.
func TestFixedSumExact(t *testing.T) {
	const n, dim = 12, 1500
	for _, enc := range []esu.Encoding{esu.Int8, esu.Float32} {
		us := fixedUpdates(t, n, dim, 0.05, enc, 8)
		for _, shift := range []int{70, 100} {
			s := NewFixedSum(dim, shift, 60, 5000*10)
			want := make([]*big.Int, dim)
			for i := range want {
				want[i] = new(big.Int)
			}
			exact := func(x float64) *big.Int {
				f := new(big.Float).SetFloat64(x)
				f.SetMantExp(f, shift)
				z, acc := f.Int(nil)
				if acc != big.Exact {
					t.Fatalf("term %v * 2^%d is not an integer: pick other values", x, shift)
				}
				return z
			}
			for k, u := range us {
				v, err := esu.ViewOf(u.payload, dim)
				must(t, err)
				mult := u.weight
				term, err := s.Prepare(v, mult, u.norm)
				must(t, err)
				s.Add([]FixedTerm{term}, 1+k%3)
				if enc == esu.Float32 {
					for i := range dim {
						want[i].Add(want[i], exact(mult*float64(v.Float32(i))))
					}
					continue
				}
				for j := range v.Chunks() {
					scale, q := v.Int8Chunk(j)
					c := exact(mult * float64(scale))
					for i, b := range q {
						x := new(big.Int).Mul(c, big.NewInt(int64(int8(b))))
						want[j*v.ChunkSize()+i].Add(want[j*v.ChunkSize()+i], x)
					}
				}
			}
			for i := range dim {
				got := new(big.Int).Lsh(big.NewInt(s.Hi[i]), 64)
				got.Add(got, new(big.Int).SetUint64(s.Lo[i]))
				if got.Cmp(want[i]) != 0 {
					t.Fatalf("%v, shift %d: coordinate %d is %v, exactly %v", enc, shift, i, got, want[i])
				}
			}
		}
	}
}
