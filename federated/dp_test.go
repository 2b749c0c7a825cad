package federated

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestL2Norm(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    []float32
		want float64
	}{
		{"empty", nil, 0},
		{"3-4-5", []float32{3, 4}, 5},
		{"four ones", []float32{1, 1, 1, 1}, 2},                           // sqrt(4)
		{"odd length", []float32{1, 2, 2, 0, 0, 0, 0, 4, 0}, 5},           // sqrt(1+4+4+16)
		{"no float32 overflow", []float32{3e38, 3e38}, 3e38 * math.Sqrt2}, // squares are 9e76 in float64
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := L2Norm(tc.v); !near(got, tc.want, 1e-7) {
				t.Errorf("L2Norm = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClipL2(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name    string
		v       []float32
		max     float64
		norm    float64
		clipped bool
		want    []float32
	}{
		{name: "under the bound", v: []float32{3, 4}, max: 10, norm: 5, want: []float32{3, 4}},
		{name: "at the bound", v: []float32{3, 4}, max: 5, norm: 5, want: []float32{3, 4}},
		// scale 2.5/5 = 0.5: [1.5, 2]
		{name: "halved", v: []float32{3, 4}, max: 2.5, norm: 5, clipped: true, want: []float32{1.5, 2}},
		// norm sqrt(4*100) = 20, scale 1/20: [0.5, -0.5, 0.5, -0.5]
		{name: "signs kept", v: []float32{10, -10, 10, -10}, max: 1, norm: 20, clipped: true, want: []float32{0.5, -0.5, 0.5, -0.5}},
		{name: "zero disables", v: []float32{3, 4}, max: 0, norm: 5, want: []float32{3, 4}},
		{name: "negative disables", v: []float32{3, 4}, max: -1, norm: 5, want: []float32{3, 4}},
		{name: "zero vector", v: []float32{0, 0}, max: 1, norm: 0, want: []float32{0, 0}},
		{name: "empty", v: []float32{}, max: 1, norm: 0, want: []float32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := slices.Clone(tc.v)
			norm, clipped := ClipL2(v, tc.max)
			if !near(norm, tc.norm, 1e-12) || clipped != tc.clipped {
				t.Errorf("norm %v clipped %v, want %v %v", norm, clipped, tc.norm, tc.clipped)
			}
			// the 2^-23 safety margin moves values by ~1.2e-7 relative
			if !closeTo(v, tc.want, 1e-6) {
				t.Errorf("clipped to %v, want %v", v, tc.want)
			}
			if tc.clipped && L2Norm(v) > tc.max {
				t.Errorf("norm after clipping %v > %v", L2Norm(v), tc.max)
			}
		})
	}
	t.Run("NaN value left alone", func(t *testing.T) {
		v := []float32{1, nan, 3}
		norm, clipped := ClipL2(v, 1)
		if !math.IsNaN(norm) || clipped || v[0] != 1 || v[2] != 3 {
			t.Errorf("norm %v clipped %v delta %v, want NaN, false, unchanged", norm, clipped, v)
		}
	})
}

// TestClipL2Bound: for random vectors of every scale, a clipped norm is in
// [C(1-2^-22), C] as documented, never above C.
func TestClipL2Bound(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for trial := range 300 {
		v := make([]float32, 1+rng.IntN(5000))
		scale := math.Pow(10, 6*rng.Float64()-3)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		c := L2Norm(v) * (0.01 + 0.98*rng.Float64()) // always clips
		if _, clipped := ClipL2(v, c); !clipped {
			t.Fatalf("trial %d: not clipped", trial)
		}
		if n := L2Norm(v); n > c || n < c*(1-0x1p-22) {
			t.Fatalf("trial %d: clipped norm %v for bound %v (ratio 1 - %v)", trial, n, c, 1-n/c)
		}
	}
}

func TestDPConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*DPConfig)
		want string // "" = valid
	}{
		{name: "default", edit: func(*DPConfig) {}},
		{name: "zero clip", edit: func(c *DPConfig) { c.ClipNorm = 0 }, want: "ClipNorm 0"},
		{name: "NaN clip", edit: func(c *DPConfig) { c.ClipNorm = math.NaN() }, want: "ClipNorm NaN"},
		{name: "infinite clip", edit: func(c *DPConfig) { c.ClipNorm = math.Inf(1) }, want: "ClipNorm +Inf"},
		{name: "zero noise", edit: func(c *DPConfig) { c.NoiseMultiplier = 0 }, want: "NoiseMultiplier 0"},
		{name: "negative noise", edit: func(c *DPConfig) { c.NoiseMultiplier = -1 }, want: "NoiseMultiplier -1"},
		{name: "delta 0", edit: func(c *DPConfig) { c.Delta = 0 }, want: "Delta 0"},
		{name: "delta 1", edit: func(c *DPConfig) { c.Delta = 1 }, want: "Delta 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultDPConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("error %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrConfig naming %q", err, tc.want)
			}
		})
	}
}

// TestAddNoise: the noise added to each coordinate has mean 0 and standard
// deviation z*C/n, measured over 200,000 coordinates (the sample std's
// relative standard error is 1/sqrt(2*200000) ~ 0.16%: 1% is > 6 of them).
func TestAddNoise(t *testing.T) {
	const dim = 200_000
	for _, tc := range []struct {
		name    string
		n       int
		c, z    float64
		wantStd float64
	}{
		{name: "n 10, C 2, z 1.5", n: 10, c: 2, z: 1.5, wantStd: 0.3},        // 1.5*2/10
		{name: "n 1, C 1, z 1", n: 1, c: 1, z: 1, wantStd: 1},                // 1*1/1
		{name: "n 100, C 0.5, z 0.8", n: 100, c: 0.5, z: 0.8, wantStd: 4e-3}, // 0.8*0.5/100
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DPConfig{ClipNorm: tc.c, NoiseMultiplier: tc.z, Delta: 1e-5}
			base := make([]float32, dim)
			for i := range base {
				base[i] = float32(i%7) - 3 // a non-zero average to add to
			}
			avg := slices.Clone(base)
			if err := AddNoise(avg, tc.n, cfg, rand.New(rand.NewPCG(9, 9))); err != nil {
				t.Fatal(err)
			}
			var s, ss float64
			for i := range avg {
				d := float64(avg[i]) - float64(base[i])
				s += d
				ss += d * d
			}
			mean := s / dim
			std := math.Sqrt(ss/dim - mean*mean)
			if math.Abs(std/tc.wantStd-1) > 0.01 {
				t.Errorf("noise std %v, want %v within 1%%", std, tc.wantStd)
			}
			// the sample mean's standard error is std/sqrt(dim); allow 4 of them
			if math.Abs(mean) > 4*tc.wantStd/math.Sqrt(dim) {
				t.Errorf("noise mean %v, want ~0", mean)
			}
			again := slices.Clone(base)
			if err := AddNoise(again, tc.n, cfg, rand.New(rand.NewPCG(9, 9))); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again, avg) {
				t.Error("the same seed gives different noise")
			}
		})
	}
}

func TestAddNoiseRefusals(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		name string
		n    int
		c    DPConfig
		rng  *rand.Rand
		is   error
		want string
	}{
		{name: "no contributions", n: 0, c: DefaultDPConfig(), rng: rng, is: ErrAggregate, want: "0 contributions"},
		{name: "negative count", n: -3, c: DefaultDPConfig(), rng: rng, is: ErrAggregate, want: "-3 contributions"},
		{name: "nil rng", n: 5, c: DefaultDPConfig(), rng: nil, is: ErrAggregate, want: "random source"},
		{name: "no noise", n: 5, c: DPConfig{ClipNorm: 1, Delta: 1e-5}, rng: rng, is: ErrConfig, want: "NoiseMultiplier 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			avg := []float32{1, 2, 3}
			err := AddNoise(avg, tc.n, tc.c, tc.rng)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v with %q", err, tc.is, tc.want)
			}
			if !slices.Equal(avg, []float32{1, 2, 3}) {
				t.Errorf("avg changed to %v", avg)
			}
		})
	}
}

func epsilonAfter(z float64, rounds int) (float64, float64) {
	a := NewAccountant(DPConfig{ClipNorm: 1, NoiseMultiplier: z, Delta: 1e-5})
	for range rounds {
		a.Step()
	}
	return a.Epsilon()
}

// TestAccountantWorked: z = 1, R = 1, delta = 1e-5. Each order alpha costs
// R*alpha/(2 z^2) = alpha/2, plus log(1/delta)/(alpha-1) = 11.5129.../(alpha-1).
// The continuous minimum is at alpha = 1 + sqrt(2*11.5129...) = 5.7985, where
// epsilon = 1/2 + 2*sqrt(11.5129.../2) = 5.29852...; on the grid of step 0.01
// alpha = 5.80 wins: 2.9 + 11.512925464970229/4.8 = 5.298526138535464.
func TestAccountantWorked(t *testing.T) {
	eps, alpha := epsilonAfter(1, 1)

	// An independent, straightforward minimisation over the same grid.
	want, wantAlpha := math.Inf(1), 0.0
	for k := 125; k <= 25600; k++ {
		a := float64(k) / 100
		e := 1*a/(2*1*1) + math.Log(1/1e-5)/(a-1)
		if e < want {
			want, wantAlpha = e, a
		}
	}
	if math.Abs(eps-want) > 1e-9 || alpha != wantAlpha {
		t.Errorf("epsilon %v at alpha %v, want %v at %v", eps, alpha, want, wantAlpha)
	}
	if math.Abs(eps-5.298526138535464) > 1e-9 || alpha != 5.8 {
		t.Errorf("epsilon %v at alpha %v, want the hand value 5.298526138535464 at 5.8", eps, alpha)
	}
	// The grid minimum is at or above the continuous one, and close to it.
	cont := 0.5 + 2*math.Sqrt(math.Log(1e5)/2)
	if eps < cont || eps-cont > 1e-5 {
		t.Errorf("epsilon %v, continuous minimum %v", eps, cont)
	}
}

func TestAccountantMonotone(t *testing.T) {
	t.Run("more noise, less epsilon", func(t *testing.T) {
		prev := math.Inf(1)
		for _, z := range []float64{0.5, 0.8, 1, 1.5, 2, 4, 10} {
			eps, _ := epsilonAfter(z, 10)
			if !(eps < prev) {
				t.Errorf("z %v: epsilon %v, not below %v", z, eps, prev)
			}
			prev = eps
		}
	})
	t.Run("more rounds, more epsilon", func(t *testing.T) {
		prev := 0.0
		for _, r := range []int{1, 2, 5, 10, 100, 1000} {
			eps, _ := epsilonAfter(1, r)
			if !(eps > prev) {
				t.Errorf("%d rounds: epsilon %v, not above %v", r, eps, prev)
			}
			prev = eps
		}
	})
}

func TestAccountantEdges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		z         float64
		rounds    int
		wantEps   float64
		wantAlpha float64
	}{
		// nothing released
		{name: "no rounds", z: 1, rounds: 0, wantEps: 0, wantAlpha: 0},
		// the optimum 1 + sqrt(2 z^2 log(1e5)) ~ 4800 is past the grid: alpha 256,
		// 256/(2*1e6) + log(1e5)/255
		{name: "huge noise hits the top order", z: 1000, rounds: 1, wantEps: 256/2e6 + math.Log(1e5)/255, wantAlpha: 256},
		// the optimum 1 + sqrt(log(1e5)/5000) ~ 1.048 is below the grid: alpha 1.25,
		// 100*1.25/(2*0.01) + log(1e5)/0.25
		{name: "little noise hits the bottom order", z: 0.1, rounds: 100, wantEps: 100*1.25/0.02 + math.Log(1e5)/0.25, wantAlpha: 1.25},
		{name: "invalid config", z: 0, rounds: 3, wantEps: math.Inf(1), wantAlpha: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAccountant(DPConfig{ClipNorm: 1, NoiseMultiplier: tc.z, Delta: 1e-5})
			for range tc.rounds {
				a.Step()
			}
			if a.Rounds() != tc.rounds {
				t.Errorf("rounds %d, want %d", a.Rounds(), tc.rounds)
			}
			eps, alpha := a.Epsilon()
			if !(eps == tc.wantEps || math.Abs(eps-tc.wantEps) <= 1e-9*max(1, tc.wantEps)) || alpha != tc.wantAlpha {
				t.Errorf("epsilon %v at alpha %v, want %v at %v", eps, alpha, tc.wantEps, tc.wantAlpha)
			}
		})
	}
	if o := RDPOrders(); len(o) != 25476 || o[0] != 1.25 || o[len(o)-1] != 256 {
		t.Errorf("orders: %d from %v to %v, want 25476 from 1.25 to 256", len(o), o[0], o[len(o)-1])
	}
}

// TestDPRound runs one DP-FedAvg round as dp.go describes it: clip, average
// unweighted, add noise. Without noise the mean of deltas clipped to C has
// norm at most C; the noise then moves it by about z*C/n*sqrt(dim).
func TestDPRound(t *testing.T) {
	const n, dim = 40, 5000
	cfg := DPConfig{ClipNorm: 0.5, NoiseMultiplier: 1.1, Delta: 1e-5}
	a := newAgg(t, DefaultAggregatorConfig(), dim)
	for _, c := range randomContribs(n, dim, 30) { // norms ~sqrt(5000) ~ 71: all clip
		if _, clipped := ClipL2(c.Delta, cfg.ClipNorm); !clipped {
			t.Fatalf("site %s not clipped", c.Site)
		}
		c.Weight = 1
		addAll(t, a, c)
	}
	r := result(t, a)
	if nrm := L2Norm(r.Delta); nrm > cfg.ClipNorm {
		t.Fatalf("mean of clipped deltas has norm %v > C = %v", nrm, cfg.ClipNorm)
	}
	noisy := slices.Clone(r.Delta)
	if err := AddNoise(noisy, n, cfg, rand.New(rand.NewPCG(31, 31))); err != nil {
		t.Fatal(err)
	}
	// expected noise norm: 1.1*0.5/40 * sqrt(5000) = 0.01375 * 70.71 = 0.9723
	if got, want := math.Sqrt(sqDist(noisy, r.Delta)), cfg.NoiseStd(n)*math.Sqrt(dim); math.Abs(got/want-1) > 0.05 {
		t.Errorf("noise norm %v, want ~%v", got, want)
	}
}
