package coordinator

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
)

// fakeClock is a settable Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func testKey(t *testing.T, seed byte) *quant.Signer {
	t.Helper()
	s, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{seed, 0xc0}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unit is a coordinator without a bus (nothing is announced or
// published; the store and the round logic are real).
type unit struct {
	c     *Coordinator
	clock *fakeClock
	sites map[string]*quant.Signer
}

func newUnit(t *testing.T, minUpdates int) *unit {
	t.Helper()
	u := &unit{clock: &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}, sites: map[string]*quant.Signer{}}
	reg := &federated.Registry{}
	for i, s := range []string{"site-a", "site-b"} {
		u.sites[s] = testKey(t, byte(i+1))
		if err := reg.Add(s, u.sites[s].Public()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Clock = t.TempDir(), reg, testKey(t, 9), u.clock
	cfg.Calibrate = func(context.Context, *policy.Model) ([]float32, error) {
		rng := rand.New(rand.NewPCG(1, 2))
		rows := make([]float32, 100*policy.NumFeatures)
		for i := range rows {
			rows[i] = float32(rng.NormFloat64())
		}
		return rows, nil
	}
	cfg.MinUpdates, cfg.RoundDuration = minUpdates, 10*time.Minute
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	net, err := policy.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Bootstrap(context.Background(), &policy.Model{Schema: policy.NewSchema(), Net: net}); err != nil {
		t.Fatal(err)
	}
	u.c = c
	return u
}

// update makes site's signed update for round r (a small delta of the
// round's base model).
func (u *unit) update(t *testing.T, site string, seq uint64, r *Round) []byte {
	t.Helper()
	m, err := u.c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	delta := make([]float32, len(m.Net.Flat()))
	for i := range delta {
		delta[i] = 0.01
	}
	payload, err := quant.EncodeUpdate(&quant.Update{Base: r.BaseModel, Encoding: quant.UpdateInt8, Values: delta}, quant.DefaultUpdateOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	h := federated.UpdateHeader{V: federated.ProtocolVersion, Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: 10, Created: u.clock.Now()}
	b, err := federated.EncodeUpdateMsg(h, payload, u.sites[site])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeadlineAndQuorum drives sync rounds with an injected clock: before
// the deadline nothing happens; at the deadline a round short of its
// quorum fails (and says why), one with its quorum aggregates into the
// next model version even though a site never answered (a straggler).
func TestDeadlineAndQuorum(t *testing.T) {
	cases := []struct {
		name       string
		minUpdates int
		wantState  string
		wantResult uint64
		wantNote   string
	}{
		{"quorum missed", 2, StateFailed, 0, "1 of 2 required updates by the deadline"},
		{"quorum met, straggler dropped", 1, StatePublished, 2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			u := newUnit(t, tc.minUpdates)
			r, err := u.c.StartRound(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := u.c.StartRound(ctx); !errors.Is(err, ErrBusy) {
				t.Fatalf("second round while collecting: %v, want ErrBusy", err)
			}
			ack, err := u.c.Process(ctx, u.update(t, "site-a", 1, r))
			if err != nil || ack.Status != federated.Accepted {
				t.Fatalf("update: %+v %v", ack, err)
			}
			u.clock.Add(9 * time.Minute) // before the 10-minute deadline
			if err := u.c.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			if got, _ := u.c.RoundRecord(r.Round); got.State != StateCollecting {
				t.Fatalf("before the deadline: %s", got.State)
			}
			u.clock.Add(time.Minute)
			if err := u.c.Tick(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := u.c.RoundRecord(r.Round)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.wantState || got.Result != tc.wantResult || !strings.Contains(got.Note, tc.wantNote) {
				t.Fatalf("round after the deadline: %+v, want %s result %d note %q", got, tc.wantState, tc.wantResult, tc.wantNote)
			}
			// A late update from the straggler changes nothing.
			ack, err = u.c.Process(ctx, u.update(t, "site-b", 1, r))
			if err != nil || ack.Status != federated.Rejected || ack.Reason != federated.ReasonRoundClosed {
				t.Fatalf("late update: %+v %v, want rejected %s", ack, err, federated.ReasonRoundClosed)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	reg := &federated.Registry{}
	if err := reg.Add("s", testKey(t, 1).Public()); err != nil {
		t.Fatal(err)
	}
	base := func() Config {
		c := DefaultConfig()
		c.DataDir, c.Sites, c.Signer = t.TempDir(), reg, testKey(t, 2)
		c.Calibrate = func(context.Context, *policy.Model) ([]float32, error) { return nil, nil }
		return c
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"no sites", func(c *Config) { c.Sites = &federated.Registry{} }, "Sites"},
		{"no signer", func(c *Config) { c.Signer = nil }, "Signer"},
		{"no calibration", func(c *Config) { c.Calibrate = nil }, "Calibrate"},
		{"bad mode", func(c *Config) { c.Mode = "sometimes" }, "Mode"},
		{"server lr", func(c *Config) { c.ServerLR = 0 }, "ServerLR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig naming %s", err, tc.want)
			}
		})
	}
	c := base()
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}
