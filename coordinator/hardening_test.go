package coordinator

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
)

var fiveSites = []string{"site-a", "site-b", "site-c", "site-d", "site-e"}

// TestAsyncOnePerSite: under a robust rule or DP an async round counts
// one update per site (a median of one site's four updates is that
// site's update); FedBuff without DP still lets a site send several.
func TestAsyncOnePerSite(t *testing.T) {
	dp := &federated.DPConfig{ClipNorm: 1, NoiseMultiplier: 1, Delta: 1e-5}
	cases := []struct {
		name       string
		rule       string
		dp         *federated.DPConfig
		onePerSite bool
	}{
		{"median", federated.RuleMedian, nil, true},
		{"trimmed mean", federated.RuleTrimmedMean, nil, true},
		{"fedavg with DP", federated.RuleFedAvg, dp, true},
		{"fedbuff", federated.RuleFedBuff, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			u := newUnitOf(t, nil, fiveSites, func(c *Config) {
				c.Mode, c.Buffer, c.Aggregator.Rule, c.DP = federated.Async, 4, tc.rule, tc.dp
			})
			r, err := u.c.StartRound(ctx)
			if err != nil {
				t.Fatal(err)
			}
			first, err := u.c.Process(ctx, u.update(t, "site-a", 1, r))
			if err != nil || first.Status != federated.Accepted {
				t.Fatalf("site-a's first update: %+v, %v", first, err)
			}
			second, err := u.c.Process(ctx, u.update(t, "site-a", 2, r))
			if err != nil {
				t.Fatal(err)
			}
			if tc.onePerSite {
				if second.Status == federated.Accepted || second.Reason != federated.ReasonReplay {
					t.Fatalf("site-a's second update in the buffer: %+v, want refused as a replay", second)
				}
			} else if second.Status != federated.Accepted {
				t.Fatalf("fedbuff: site-a's second update: %+v, want accepted", second)
			}
			got, err := u.c.RoundRecord(r.Round)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 2}[tc.onePerSite]; got.Accepted != want {
				t.Fatalf("accepted %d, want %d", got.Accepted, want)
			}
			// other sites still fill the buffer
			for i, s := range []string{"site-b", "site-c", "site-d"}[:4-got.Accepted] {
				if ack, err := u.c.Process(ctx, u.update(t, s, 1, r)); err != nil || ack.Status != federated.Accepted {
					t.Fatalf("update %d (%s): %+v, %v", i, s, ack, err)
				}
			}
			if got, _ = u.c.RoundRecord(r.Round); got.State != StatePublished {
				t.Fatalf("round %d is %s (%s) with a full buffer, want published", r.Round, got.State, got.Note)
			}
		})
	}
}

// fixed128 is x * 2^shift as the hi and lo words of FixedSum's sums,
// computed with math/big (independently of package federated).
func fixed128(x float64, shift int) (int64, uint64) {
	b, _ := new(big.Float).SetMantExp(big.NewFloat(x), shift).Int(nil)
	lo := new(big.Int).And(b, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	return new(big.Int).Rsh(b, 64).Int64(), lo
}

// TestRegionalAggregateBounds: a region's aggregate is held to what the
// weights and norms it declares allow. One site of 10 samples sending 0.01
// on every coordinate adds 10 x 0.01 = 0.1 per coordinate (no clipping:
// its norm is far below the clip norm); sums 1% above that, or any sums
// with 1 declared sample, are refused; a site listed with 0 samples is
// refused too, and the store opens again afterwards.
func TestRegionalAggregateBounds(t *testing.T) {
	cases := []struct {
		name     string
		samples  int64
		perCoord float64
		accepted bool
		reason   string
	}{
		{"honest", 10, 0.1, true, ""},
		{"1% above its weight", 10, 0.101, false, federated.ReasonTooLarge},
		{"one sample, large sums", 1, 100, false, federated.ReasonTooLarge},
		{"zero samples", 0, 0, false, federated.ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rk := testKey(t, 50)
			u := newUnitOf(t, nil, fiveSites, func(c *Config) {
				c.Regions = &federated.Regions{}
				if err := c.Regions.Add("eu", rk.Public(), "site-a"); err != nil {
					t.Fatal(err)
				}
			})
			r, err := u.c.StartRound(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Sum == nil {
				t.Fatal("not a summing round")
			}
			m, err := u.c.FloatModel(r.BaseVersion)
			if err != nil {
				t.Fatal(err)
			}
			dims := m.NumParams()
			norm := 0.01 * math.Sqrt(float64(dims)) // the site's own update's L2 norm
			a := &federated.RegionalAggregate{Header: federated.RegionalHeader{V: federated.ProtocolVersion, Region: "eu", Round: r.Round, Shift: r.Sum.Shift,
				Sites: []federated.RegionalSite{{Site: "site-a", Seq: 1, Samples: tc.samples, BaseVersion: r.BaseVersion, Norm: norm}}}}
			a.Hi, a.Lo = make([]int64, dims), make([]uint64, dims)
			for i := range dims {
				a.Hi[i], a.Lo[i] = fixed128(tc.perCoord, r.Sum.Shift)
			}
			if tc.samples == 0 {
				// the encoder refuses it: a region that sends one signs
				// bytes of its own (here: 7 samples written as 0, signed again)
				if _, err := federated.EncodeRegional(a, rk); err == nil {
					t.Fatal("EncodeRegional took a site of 0 samples")
				}
				a.Header.Sites[0].Samples = 7
			}
			raw, err := federated.EncodeRegional(a, rk)
			if err != nil {
				t.Fatal(err)
			}
			if tc.samples == 0 {
				body := bytes.Replace(raw[:len(raw)-ed25519.SignatureSize], []byte(`"samples":7`), []byte(`"samples":0`), 1)
				raw = append(body, rk.Sign(body)...)
			}
			v, err := u.c.ProcessRegional(ctx, "", raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Status == federated.Accepted; got != tc.accepted || v.Reason != tc.reason {
				t.Fatalf("verdict %s %s (%s), want accepted %v, reason %q", v.Status, v.Reason, v.Detail, tc.accepted, tc.reason)
			}
			// the store still opens, and a round still closes
			c2 := u.reopen(t)
			defer c2.Close()
			u.c = c2
			if ack, err := c2.Process(ctx, u.update(t, "site-b", 1, r)); err != nil || ack.Status != federated.Accepted {
				t.Fatalf("site-b: %+v, %v", ack, err)
			}
			u.clock.Add(10 * time.Minute)
			if err := c2.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := c2.RoundRecord(r.Round); got.State != StatePublished {
				t.Fatalf("round %d is %s (%s), want published", r.Round, got.State, got.Note)
			}
		})
	}
}

// TestDPNoiseUnpredictable: the DP noise is drawn from the store's secret,
// not from the configured seed alone, so regenerating the stream the seed
// and the round used to give (PCG(seed, round)) and subtracting it from a
// published model does not give the site's update back; the same store
// draws the same noise for the same round (a recomputation after a crash
// adds the same bytes), across a reopen, and another store other noise.
func TestDPNoiseUnpredictable(t *testing.T) {
	mk := func() *unit {
		return newUnitOf(t, nil, fiveSites, func(c *Config) {
			c.DP = &federated.DPConfig{ClipNorm: 1, NoiseMultiplier: 1, Delta: 1e-5}
			c.Seed = 1
		})
	}
	u := mk()
	r, got := u.publishedRound(t) // site-a's 0.01 on every coordinate
	base, _ := u.c.FloatModel(r.BaseVersion)
	next, _ := u.c.FloatModel(got.Result)
	bf, nf := base.Flat(), next.Flat()
	// the attack: one contribution, noise std z*C = 1, from PCG(seed, round)
	rng := rand.New(rand.NewPCG(1, r.Round))
	var worst float64
	var read int
	for i := range bf {
		noise := rng.NormFloat64()
		d := float64(nf[i]) - float64(bf[i])
		if d == 0 { // an input constant in training, kept unread
			continue
		}
		worst = math.Max(worst, math.Abs(d-noise-0.01))
		read++
	}
	// with the old stream every coordinate came back within 2e-7; with
	// independent noise of std 1, hundreds of coordinates differ by more
	// than 1 somewhere
	if read < 100 || worst < 1 {
		t.Fatalf("%d coordinates, the regenerated noise leaves at most %.3g: the site's update is recovered", read, worst)
	}

	draw := func(c *Coordinator) []float64 {
		rng, err := c.dpRNG(7)
		if err != nil {
			t.Fatal(err)
		}
		return []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
	}
	secret := func(c *Coordinator) []byte {
		var s []byte
		if err := c.view(func(tx *bolt.Tx) error {
			var err error
			s, err = store.DPSecret(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	first, s1 := draw(u.c), secret(u.c)
	c2 := u.reopen(t)
	defer c2.Close()
	if again := draw(c2); !slices.Equal(first, again) || !bytes.Equal(s1, secret(c2)) {
		t.Fatalf("after a reopen round 7 draws %v, before %v", again, first)
	}
	if other := draw(mk().c); slices.Equal(first, other) {
		t.Fatalf("two stores draw the same noise %v", other)
	}
}

// TestRoundRecordsPruned: round records are kept for RoundKeep rounds
// (each lists the round's expected sites: about 20 KB at 1,000 sites,
// and they were kept for ever), and the DP accountant, which counts the
// noised rounds from their records when the coordinator starts, still
// counts the pruned ones: its epsilon must not fall back after a restart.
func TestRoundRecordsPruned(t *testing.T) {
	u := newUnitOf(t, nil, fiveSites, func(c *Config) {
		c.DP = &federated.DPConfig{ClipNorm: 1, NoiseMultiplier: 1, Delta: 1e-5}
		c.KeepUpdates, c.RoundKeep = 1, 2
	})
	const rounds = 5
	for seq := uint64(1); seq <= rounds; seq++ {
		u.publishedRoundSeq(t, seq)
	}
	for n := uint64(1); n <= rounds; n++ {
		_, err := u.c.RoundRecord(n)
		if kept := n > rounds-2; kept != (err == nil) || !kept && !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d of %d: %v, want kept %v (RoundKeep 2)", n, rounds, err, kept)
		}
	}
	if got := u.c.dp.Rounds(); got != rounds {
		t.Fatalf("DP accountant at %d noised rounds, want %d", got, rounds)
	}
	c2 := u.reopen(t)
	defer c2.Close()
	if got := c2.dp.Rounds(); got != rounds {
		t.Fatalf("after a restart the DP accountant counts %d noised rounds, want %d (3 of them pruned)", got, rounds)
	}
}
