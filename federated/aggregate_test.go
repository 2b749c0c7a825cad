package federated

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// allRules lists every rule with a configuration that accepts the small
// inputs of these tests (Krum with f = 0 needs n >= 3).
func allRules() []AggregatorConfig {
	var out []AggregatorConfig
	for _, r := range []string{RuleFedAvg, RuleFedBuff, RuleMedian, RuleTrimmedMean, RuleKrum, RuleMultiKrum} {
		c := DefaultAggregatorConfig()
		c.Rule, c.Byzantine = r, 0
		out = append(out, c)
	}
	return out
}

func newAgg(t testing.TB, c AggregatorConfig, dim int) Aggregator {
	t.Helper()
	a, err := NewAggregator(c, dim)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addAll(t testing.TB, a Aggregator, cs ...Contribution) {
	t.Helper()
	for _, c := range cs {
		if err := a.Add(c); err != nil {
			t.Fatal(err)
		}
	}
}

func result(t testing.TB, a Aggregator) Result {
	t.Helper()
	r, err := a.Result()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// contrib is a contribution from site with weight w and staleness s.
func contrib(site string, w float64, s int, delta ...float32) Contribution {
	return Contribution{Site: site, Delta: delta, Weight: w, Staleness: s}
}

// closeTo reports whether got and want agree within tol, absolute or
// relative to |want|, coordinate by coordinate.
func closeTo(got, want []float32, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if !(math.Abs(g-w) <= tol*max(1, math.Abs(w))) {
			return false
		}
	}
	return true
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*max(1, math.Abs(want)) }

// randomContribs returns n contributions of dimension dim with N(0, 1)
// values and weights in [1, 100).
func randomContribs(n, dim int, seed uint64) []Contribution {
	rng := rand.New(rand.NewPCG(seed, 11))
	cs := make([]Contribution, n)
	for k := range cs {
		d := make([]float32, dim)
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
		cs[k] = Contribution{Site: fmt.Sprintf("site-%d", k), Delta: d, Weight: 1 + 99*rng.Float64(), Staleness: rng.IntN(5)}
	}
	return cs
}

func TestFedAvgWorked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cs     []Contribution
		want   []float32
		wTotal float64
	}{
		{
			name: "weights 1 and 3",
			cs:   []Contribution{contrib("a", 1, 0, 1, 2), contrib("b", 3, 0, 3, 6)},
			// (1*1 + 3*3)/(1+3) = 10/4 = 2.5; (1*2 + 3*6)/4 = 20/4 = 5
			want: []float32{2.5, 5}, wTotal: 4,
		},
		{
			name: "staleness is ignored",
			cs:   []Contribution{contrib("a", 1, 0, 1, 2), contrib("b", 3, 8, 3, 6)},
			// as above: fedavg does not look at staleness
			want: []float32{2.5, 5}, wTotal: 4,
		},
		{
			name: "equal weights give the plain mean",
			cs:   []Contribution{contrib("a", 2, 0, 1, -1), contrib("b", 2, 0, 2, 0), contrib("c", 2, 0, 6, 4)},
			// (1+2+6)/3 = 3; (-1+0+4)/3 = 1
			want: []float32{3, 1}, wTotal: 6,
		},
		{
			name: "one contribution is returned as is",
			cs:   []Contribution{contrib("a", 7, 0, 0.5, -0.25)},
			want: []float32{0.5, -0.25}, wTotal: 7,
		},
		{
			name: "fractional weights",
			cs:   []Contribution{contrib("a", 0.25, 0, 4), contrib("b", 0.75, 0, 8)},
			// (0.25*4 + 0.75*8)/1 = 1 + 6 = 7
			want: []float32{7}, wTotal: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAgg(t, DefaultAggregatorConfig(), 0)
			addAll(t, a, tc.cs...)
			r := result(t, a)
			if !closeTo(r.Delta, tc.want, 1e-6) {
				t.Errorf("delta %v, want %v", r.Delta, tc.want)
			}
			if r.Stats["weight_total"] != tc.wTotal || r.Stats["count"] != float64(len(tc.cs)) {
				t.Errorf("stats %v, want weight_total %v, count %d", r.Stats, tc.wTotal, len(tc.cs))
			}
			if len(r.Used) != len(tc.cs) || a.Count() != len(tc.cs) {
				t.Errorf("used %v, count %d; want all %d sites", r.Used, a.Count(), len(tc.cs))
			}
			for i, c := range tc.cs {
				if r.Used[i] != c.Site {
					t.Errorf("used[%d] = %q, want %q", i, r.Used[i], c.Site)
				}
			}
		})
	}
}

func TestFedBuffStaleness(t *testing.T) {
	for _, tc := range []struct {
		name          string
		a             float64 // staleness exponent
		cs            []Contribution
		want          []float32
		stalenessMean float64
		discountMean  float64
	}{
		{
			name: "fresh contributions equal fedavg",
			a:    0.5,
			cs:   []Contribution{contrib("a", 1, 0, 1, 2), contrib("b", 3, 0, 3, 6)},
			// discounts (1+0)^-0.5 = 1: (1*1+3*3)/4 = 2.5; (1*2+3*6)/4 = 5
			want: []float32{2.5, 5}, stalenessMean: 0, discountMean: 1,
		},
		{
			name: "one site 3 rounds stale at a=0.5",
			a:    0.5,
			cs:   []Contribution{contrib("a", 1, 0, 1, 2), contrib("b", 3, 3, 3, 6)},
			// b's weight 3*(1+3)^-0.5 = 3/2 = 1.5; total 2.5;
			// (1*1 + 1.5*3)/2.5 = 5.5/2.5 = 2.2; (1*2 + 1.5*6)/2.5 = 11/2.5 = 4.4;
			// staleness mean (0+3)/2 = 1.5; discount mean 2.5/4 = 0.625
			want: []float32{2.2, 4.4}, stalenessMean: 1.5, discountMean: 0.625,
		},
		{
			name: "stale by 1 and 3 at a=1",
			a:    1,
			cs:   []Contribution{contrib("a", 2, 1, 4, 0), contrib("b", 2, 3, 0, 8)},
			// weights 2/2 = 1 and 2/4 = 0.5, total 1.5;
			// (1*4 + 0.5*0)/1.5 = 8/3; (1*0 + 0.5*8)/1.5 = 8/3;
			// staleness mean 2; discount mean 1.5/4 = 0.375
			want: []float32{8.0 / 3, 8.0 / 3}, stalenessMean: 2, discountMean: 0.375,
		},
		{
			name: "a=0 ignores staleness",
			a:    0,
			cs:   []Contribution{contrib("a", 1, 5, 1, 2), contrib("b", 3, 0, 3, 6)},
			// (1+5)^0 = 1: as fedavg, [2.5, 5]; staleness mean 2.5
			want: []float32{2.5, 5}, stalenessMean: 2.5, discountMean: 1,
		},
		{
			name: "equal staleness cancels in the mean",
			a:    0.5,
			cs:   []Contribution{contrib("a", 1, 3, 1, 2), contrib("b", 3, 3, 3, 6)},
			// both discounted by 4^-0.5 = 0.5: the mean is fedavg's [2.5, 5];
			// the discount shows in discount_mean = 0.5
			want: []float32{2.5, 5}, stalenessMean: 3, discountMean: 0.5,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultAggregatorConfig()
			c.Rule, c.StalenessExponent = RuleFedBuff, tc.a
			a := newAgg(t, c, 2)
			addAll(t, a, tc.cs...)
			r := result(t, a)
			if !closeTo(r.Delta, tc.want, 1e-6) {
				t.Errorf("delta %v, want %v", r.Delta, tc.want)
			}
			if !near(r.Stats["staleness_mean"], tc.stalenessMean, 1e-12) || !near(r.Stats["discount_mean"], tc.discountMean, 1e-12) {
				t.Errorf("stats %v, want staleness_mean %v, discount_mean %v", r.Stats, tc.stalenessMean, tc.discountMean)
			}
		})
	}
}

// TestStreamingMemory: fedavg and fedbuff claim O(parameters) memory and
// allocate (almost) nothing per contribution; the rules that keep every
// contribution say so and allocate at least the contribution's size.
func TestStreamingMemory(t *testing.T) {
	const dim, n = 10_000, 200
	cs := randomContribs(4, dim, 1)
	for _, c := range allRules() {
		t.Run(c.Rule, func(t *testing.T) {
			a := newAgg(t, c, dim)
			wantStreaming := c.Rule == RuleFedAvg || c.Rule == RuleFedBuff
			if a.Streaming() != wantStreaming {
				t.Fatalf("Streaming() = %v, want %v", a.Streaming(), wantStreaming)
			}
			addAll(t, a, cs[0]) // the streaming sum is allocated here
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range n {
				if err := a.Add(cs[i%len(cs)]); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perAdd := float64(after.TotalAlloc-before.TotalAlloc) / n
			t.Logf("%.0f bytes allocated per Add of %d parameters", perAdd, dim)
			// Streaming: only the Used list grows (a 16-byte string header,
			// ~32 bytes amortised); allow 1% of the delta's 40,000 bytes.
			if wantStreaming && perAdd > 0.01*4*dim {
				t.Errorf("streaming rule allocates %.0f bytes per Add", perAdd)
			}
			if !wantStreaming && perAdd < 4*dim {
				t.Errorf("hold-all rule allocates only %.0f bytes per Add, less than the %d-byte delta", perAdd, 4*dim)
			}
		})
	}
}

// TestOrderIndependence: the streaming rules give the same mean, within
// float tolerance, whatever the order of the contributions; the robust
// rules give the same result too (sorting and scoring do not depend on it,
// only float summation order does).
func TestOrderIndependence(t *testing.T) {
	cs := randomContribs(50, 300, 2)
	rev := slices.Clone(cs)
	slices.Reverse(rev)
	shuffled := slices.Clone(cs)
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, c := range allRules() {
		t.Run(c.Rule, func(t *testing.T) {
			a := newAgg(t, c, 0)
			addAll(t, a, cs...)
			want := result(t, a)
			for name, order := range map[string][]Contribution{"reversed": rev, "shuffled": shuffled} {
				b := newAgg(t, c, 0)
				addAll(t, b, order...)
				got := result(t, b)
				// float32 results of float64 sums of 50 values: 1e-6 covers
				// the rounding to float32 (6e-8 relative) with margin.
				if !closeTo(got.Delta, want.Delta, 1e-6) {
					t.Errorf("%s order changes the result", name)
				}
			}
		})
	}
}

// TestDeterminism: the same inputs in the same order give a bit-identical
// result.
func TestDeterminism(t *testing.T) {
	cs := randomContribs(30, 257, 4)
	for _, c := range allRules() {
		t.Run(c.Rule, func(t *testing.T) {
			var results []Result
			for range 2 {
				a := newAgg(t, c, 257)
				addAll(t, a, cs...)
				results = append(results, result(t, a))
			}
			if !slices.Equal(results[0].Delta, results[1].Delta) || !slices.Equal(results[0].Used, results[1].Used) {
				t.Error("two runs differ")
			}
			for k, v := range results[0].Stats {
				if v != results[1].Stats[k] {
					t.Errorf("stat %s: %v then %v", k, v, results[1].Stats[k])
				}
			}
		})
	}
}

// TestAddRefusals: every rule refuses a bad contribution with an error
// naming the site and the problem, and is unchanged afterwards: its result
// is bit-identical to that of an aggregator that never saw the bad add.
func TestAddRefusals(t *testing.T) {
	good := []Contribution{
		contrib("g0", 1, 0, 1, 2, 3),
		contrib("g1", 2, 1, -1, 0, 4),
		contrib("g2", 3, 0, 2, 2, 2),
		contrib("g3", 1, 2, 0, 1, -3),
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	type refusal struct {
		name  string
		c     Contribution
		rules []string // nil: every rule
		want  string   // in the error message, besides the site
	}
	refusals := []refusal{
		{name: "too short", c: contrib("bad", 1, 0, 1, 2), want: "has 2 values, want 3"},
		{name: "too long", c: contrib("bad", 1, 0, 1, 2, 3, 4), want: "has 4 values, want 3"},
		{name: "empty", c: contrib("bad", 1, 0), want: "empty delta"},
		{name: "NaN value", c: contrib("bad", 1, 0, 1, nan, 3), want: "delta[1] is NaN"},
		{name: "+Inf value", c: contrib("bad", 1, 0, 1, 2, inf), want: "delta[2] is +Inf"},
		{name: "-Inf value", c: contrib("bad", 1, 0, -inf, 2, 3), want: "delta[0] is -Inf"},
		{name: "zero weight", c: contrib("bad", 0, 0, 1, 2, 3), want: "weight 0, want finite and > 0"},
		{name: "negative weight", c: contrib("bad", -1, 0, 1, 2, 3), want: "weight -1, want finite and > 0"},
		{name: "NaN weight", c: contrib("bad", math.NaN(), 0, 1, 2, 3), want: "weight NaN, want finite and > 0"},
		{name: "infinite weight", c: contrib("bad", math.Inf(1), 0, 1, 2, 3), want: "weight +Inf, want finite and > 0"},
		{name: "negative staleness", c: contrib("bad", 1, -1, 1, 2, 3), want: "staleness -1 is negative"},
		{
			// 1e300 * 3e38 overflows float64: the running sum would be +Inf.
			name: "weight overflowing the sum", c: contrib("bad", 1e300, 0, 1, 2, 3e38),
			rules: []string{RuleFedAvg, RuleFedBuff}, want: "overflows the running sum",
		},
		{
			// 5e-324 (the smallest float64) * (1+3)^-0.5 rounds to 0.
			name: "weight discounted to zero", c: contrib("bad", 5e-324, 3, 1, 2, 3),
			rules: []string{RuleFedBuff}, want: "discounts to 0",
		},
	}
	for _, c := range allRules() {
		for _, tc := range refusals {
			if tc.rules != nil && !slices.Contains(tc.rules, c.Rule) {
				continue
			}
			t.Run(c.Rule+"/"+tc.name, func(t *testing.T) {
				clean := newAgg(t, c, 0)
				addAll(t, clean, good...)
				want := result(t, clean)

				a := newAgg(t, c, 0)
				addAll(t, a, good[:2]...)
				err := a.Add(tc.c)
				if !errors.Is(err, ErrContribution) {
					t.Fatalf("error %v, want ErrContribution", err)
				}
				if msg := err.Error(); !strings.Contains(msg, `site "bad"`) || !strings.Contains(msg, tc.want) {
					t.Errorf("error %q does not name the site and %q", msg, tc.want)
				}
				if a.Count() != 2 {
					t.Errorf("count %d after a refused add, want 2", a.Count())
				}
				addAll(t, a, good[2:]...)
				got := result(t, a)
				if !slices.Equal(got.Delta, want.Delta) || !slices.Equal(got.Used, want.Used) {
					t.Errorf("result %v %v after a refused add, want %v %v", got.Delta, got.Used, want.Delta, want.Used)
				}
			})
		}
	}
	// A configured dimension is enforced from the first contribution.
	t.Run("configured dimension", func(t *testing.T) {
		a := newAgg(t, DefaultAggregatorConfig(), 4)
		if err := a.Add(good[0]); !errors.Is(err, ErrContribution) || !strings.Contains(err.Error(), "has 3 values, want 4") {
			t.Errorf("error %v, want a refusal of 3 values for 4", err)
		}
	})
}

func TestResultWithoutContributions(t *testing.T) {
	for _, c := range allRules() {
		t.Run(c.Rule, func(t *testing.T) {
			a := newAgg(t, c, 3)
			if _, err := a.Result(); !errors.Is(err, ErrAggregate) || !strings.Contains(err.Error(), "no contributions") {
				t.Errorf("error %v, want ErrAggregate: no contributions", err)
			}
			if a.Name() != c.Rule {
				t.Errorf("name %q, want %q", a.Name(), c.Rule)
			}
		})
	}
}

func TestAggregatorConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*AggregatorConfig)
		want string // "" = valid
	}{
		{name: "default", edit: func(*AggregatorConfig) {}},
		{name: "empty rule means fedavg", edit: func(c *AggregatorConfig) { c.Rule = "" }},
		{name: "beta 0", edit: func(c *AggregatorConfig) { c.TrimBeta = 0 }},
		{name: "unknown rule", edit: func(c *AggregatorConfig) { c.Rule = "fedsgd" }, want: `Rule "fedsgd"`},
		{name: "beta 0.5", edit: func(c *AggregatorConfig) { c.TrimBeta = 0.5 }, want: "TrimBeta 0.5"},
		{name: "beta negative", edit: func(c *AggregatorConfig) { c.TrimBeta = -0.1 }, want: "TrimBeta -0.1"},
		{name: "beta NaN", edit: func(c *AggregatorConfig) { c.TrimBeta = math.NaN() }, want: "TrimBeta NaN"},
		{name: "negative f", edit: func(c *AggregatorConfig) { c.Byzantine = -1 }, want: "Byzantine -1"},
		{name: "negative m", edit: func(c *AggregatorConfig) { c.MultiKrumM = -2 }, want: "MultiKrumM -2"},
		{name: "negative exponent", edit: func(c *AggregatorConfig) { c.StalenessExponent = -0.5 }, want: "StalenessExponent -0.5"},
		{name: "infinite exponent", edit: func(c *AggregatorConfig) { c.StalenessExponent = math.Inf(1) }, want: "StalenessExponent +Inf"},
		{name: "first bad field is named", edit: func(c *AggregatorConfig) { c.TrimBeta, c.Byzantine = 1, -1 }, want: "TrimBeta 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultAggregatorConfig()
			tc.edit(&c)
			err := c.Validate()
			_, nerr := NewAggregator(c, 1)
			if tc.want == "" {
				if err != nil || nerr != nil {
					t.Errorf("errors %v, %v; want valid", err, nerr)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrConfig naming %q", err, tc.want)
			}
			if !errors.Is(nerr, ErrConfig) {
				t.Errorf("NewAggregator error %v, want ErrConfig", nerr)
			}
		})
	}
	if _, err := NewAggregator(DefaultAggregatorConfig(), -1); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "dimension -1") {
		t.Errorf("NewAggregator(dim -1): %v, want ErrConfig naming the dimension", err)
	}
}

// TestResultFinite: every rule's result is finite for random finite
// inputs, including values at float32's extremes and weights spanning
// twelve orders of magnitude.
func TestResultFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	value := func() float32 {
		switch rng.IntN(6) {
		case 0:
			return math.MaxFloat32 * float32(2*rng.Float64()-1)
		case 1:
			return math.SmallestNonzeroFloat32 * float32(rng.IntN(100)-50)
		case 2:
			return float32(rng.NormFloat64() * 1e30)
		default:
			return float32(rng.NormFloat64())
		}
	}
	for trial := range 20 {
		n, dim := 3+rng.IntN(12), 1+rng.IntN(40)
		cs := make([]Contribution, n)
		for k := range cs {
			d := make([]float32, dim)
			for i := range d {
				d[i] = value()
			}
			cs[k] = Contribution{Site: fmt.Sprint(k), Delta: d, Weight: math.Pow(10, 12*rng.Float64()-6), Staleness: rng.IntN(100)}
		}
		for _, c := range allRules() {
			c.TrimBeta = 0.2 // n >= 3: k = 1, 2k < n
			a := newAgg(t, c, dim)
			addAll(t, a, cs...)
			r := result(t, a)
			for i, v := range r.Delta {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("trial %d, %s: delta[%d] = %v", trial, c.Rule, i, v)
				}
			}
			for k, v := range r.Stats {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("trial %d, %s: stat %s = %v", trial, c.Rule, k, v)
				}
			}
		}
	}
}

// TestResultThenAdd: Result does not consume the aggregator.
func TestResultThenAdd(t *testing.T) {
	for _, c := range allRules() {
		t.Run(c.Rule, func(t *testing.T) {
			cs := randomContribs(6, 5, 6)
			a := newAgg(t, c, 0)
			addAll(t, a, cs[:3]...)
			first := result(t, a)
			again := result(t, a)
			if !slices.Equal(first.Delta, again.Delta) {
				t.Error("a second Result differs")
			}
			addAll(t, a, cs[3:]...)
			b := newAgg(t, c, 0)
			addAll(t, b, cs...)
			if got, want := result(t, a), result(t, b); !slices.Equal(got.Delta, want.Delta) {
				t.Errorf("adding after Result: %v, want %v", got.Delta, want.Delta)
			}
		})
	}
}
