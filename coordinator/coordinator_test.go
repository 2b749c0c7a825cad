package coordinator

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
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
	net, err := nn.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	return newUnitWith(t, minUpdates, &nn.Model{Schema: policy.NewSchema(), Net: net})
}

// newUnitWith is newUnit bootstrapped with m.
func newUnitWith(t *testing.T, minUpdates int, m *nn.Model) *unit {
	t.Helper()
	return newUnitOf(t, m, []string{"site-a", "site-b"}, func(c *Config) { c.MinUpdates = minUpdates })
}

// newUnitOf is a unit of the given sites bootstrapped with m (nil: a
// small random network), its configuration changed by mod (quorum 1 and
// a 10-minute deadline before).
func newUnitOf(t *testing.T, m *nn.Model, sites []string, mod func(*Config)) *unit {
	t.Helper()
	if m == nil {
		net, err := nn.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(3, 3)))
		if err != nil {
			t.Fatal(err)
		}
		m = &nn.Model{Schema: policy.NewSchema(), Net: net}
	}
	u := &unit{clock: &fakeClock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}, sites: map[string]*quant.Signer{}}
	reg := &federated.Registry{}
	for i, s := range sites {
		u.sites[s] = testKey(t, byte(i+1))
		if err := reg.Add(s, u.sites[s].Public()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Clock = t.TempDir(), reg, testKey(t, 9), u.clock
	cfg.Calibrate = normalCalibration
	cfg.MinUpdates, cfg.RoundDuration = 1, 10*time.Minute
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Bootstrap(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	u.c = c
	return u
}

// update makes site's signed update for round r (a small delta of the
// round's base model: 0.01 on every coordinate, int8, 10 samples).
func (u *unit) update(t *testing.T, site string, seq uint64, r *Round) []byte {
	t.Helper()
	return u.updateOf(t, site, seq, r, 0.01, 10, esu.Int8)
}

// updateOf is site's signed update for round r: every coordinate v, with
// samples samples, in encoding enc.
func (u *unit) updateOf(t *testing.T, site string, seq uint64, r *Round, v float32, samples int64, enc esu.Encoding) []byte {
	t.Helper()
	m, err := u.c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	delta := make([]float32, m.NumParams())
	for i := range delta {
		delta[i] = v
	}
	payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Encoding: enc, Values: delta}, esu.DefaultOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	h := federated.UpdateHeader{V: federated.ProtocolVersion, Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: samples, Created: u.clock.Now()}
	b, err := federated.EncodeUpdateMsg(h, payload, u.sites[site])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publishedRound runs a round to publication: it opens, site-a's update
// is accepted, and the deadline aggregates it (a unit of minUpdates 1).
func (u *unit) publishedRound(t *testing.T) (opened, record *Round) {
	t.Helper()
	return u.publishedRoundSeq(t, 1)
}

// publishedRoundSeq is publishedRound with site-a's update seq.
func (u *unit) publishedRoundSeq(t *testing.T, seq uint64) (opened, record *Round) {
	t.Helper()
	ctx := context.Background()
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := u.c.Process(ctx, u.update(t, "site-a", seq, r)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("update: %+v %v", ack, err)
	}
	u.clock.Add(10 * time.Minute)
	if err := u.c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := u.c.RoundRecord(r.Round)
	if err != nil || got.State != StatePublished {
		t.Fatalf("round: %+v %v, want published", got, err)
	}
	return r, got
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
		c.Calibrate = func(context.Context, *nn.Model) ([]float32, error) { return nil, nil }
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
		{"negative replicas", func(c *Config) { c.Replicas = -1 }, "Replicas"},
		{"replicas above JetStream's 5", func(c *Config) { c.Replicas = 6 }, "Replicas"},
		{"ha without a replica id", func(c *Config) { c.HA = true }, "ReplicaID"},
		{"lease ttl under a second", func(c *Config) { c.LeaseTTL = 500 * time.Millisecond }, "LeaseTTL"},
		{"negative checkpoint interval", func(c *Config) { c.CheckpointEvery = -time.Second }, "CheckpointEvery"},
		{"negative in-flight bytes", func(c *Config) { c.MaxInflightBytes = -1 }, "MaxInflightBytes"},
		{"async with regions", func(c *Config) {
			c.Mode, c.Regions = federated.Async, &federated.Regions{}
			if err := c.Regions.Add("eu", testKey(t, 3).Public(), "s"); err != nil {
				t.Fatal(err)
			}
		}, "Regions"},
		// one site registered: a median buffer of 2 could never fill
		{"async median buffer above the sites", func(c *Config) {
			c.Mode, c.Buffer, c.Aggregator.Rule = federated.Async, 2, federated.RuleMedian
		}, "Buffer"},
		{"round records kept fewer than the rounds' updates", func(c *Config) { c.RoundKeep, c.KeepUpdates = 5, 10 }, "RoundKeep"},
		{"round records kept negative", func(c *Config) { c.RoundKeep = -1 }, "RoundKeep"},
		{"async DP buffer above the sites", func(c *Config) {
			c.Mode, c.Buffer = federated.Async, 2
			c.DP = &federated.DPConfig{ClipNorm: 1, NoiseMultiplier: 1, Delta: 1e-5}
		}, "Buffer"},
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

// TestOutOfOrderRedelivery: the stream redelivers an update the
// coordinator had fetched but not judged when it stopped only after
// AckWait, by when the site's newer updates were judged: it arrives below
// the site's high-water mark yet was never judged, and must be judged then
// (it used to be refused as a replay, and lost, since the site had
// already dropped it from its outbox). What was judged keeps its verdict:
// the last one delivered again gets the same verdict, older ones count as
// replays, and sequences more than judgedWindow below the high-water mark
// are replays whatever they are.
func TestOutOfOrderRedelivery(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 2) // quorum 2: the round stays open
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	process := func(seq uint64) *federated.Ack {
		t.Helper()
		ack, err := u.c.Process(ctx, u.update(t, "site-a", seq, r))
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	replays := func() int {
		t.Helper()
		sites, err := u.c.Sites()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sites {
			if s.Site.Site == "site-a" {
				return s.Site.Rejected[federated.ReasonReplay]
			}
		}
		return 0
	}
	if ack := process(2); ack.Status != federated.Accepted {
		t.Fatalf("seq 2: %+v, want accepted", ack)
	}
	// seq 1 arrives after seq 2 and was never judged: judged now (the site
	// already contributed to this sync round, so the round rules reject
	// it: status rejected, not the duplicate of an update refused unjudged)
	first := process(1)
	if first.Status != federated.Rejected || replays() != 1 {
		t.Fatalf("seq 1 redelivered after seq 2: %+v with %d replays counted, want it judged (rejected by the round, 1 counted)", first, replays())
	}
	// the last judged update (HWM) again: the same verdict, not counted
	if ack := process(2); ack.Status != federated.Accepted || replays() != 1 {
		t.Fatalf("seq 2 again: %+v with %d replays, want accepted and none more counted", ack, replays())
	}
	// a judged one below HWM again: a replay, counted
	if ack := process(1); ack.Status != federated.Duplicate || ack.Reason != federated.ReasonReplay || ack.HWM != 2 || replays() != 2 {
		t.Fatalf("seq 1 again: %+v with %d replays, want duplicate/replay with high-water mark 2 and 2 counted", ack, replays())
	}
	// far below the kept verdicts: a replay even though never judged (with
	// HWM 2+judgedWindow+1, verdicts are kept for seqs above 3: 3 is out)
	process(2 + store.JudgedWindow + 1)
	if ack := process(3); ack.Status != federated.Duplicate || ack.Reason != federated.ReasonReplay {
		t.Fatalf("seq 3 after HWM %d: %+v, want a replay (below the kept window)", 2+store.JudgedWindow+1, ack)
	}
}

// TestUnattributedRefusalCountedOnce: a message no site can be blamed for
// (junk) that the stream delivers again under the same stream sequence (the
// coordinator stopped before acking it) is refused again but counted and
// audited once; another junk message (another sequence) counts.
func TestUnattributedRefusalCountedOnce(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	junk := func(seq uint64) {
		t.Helper()
		if ack, err := u.c.processFrom(ctx, "", []byte("not an update"), seq); err != nil || ack != nil {
			t.Fatalf("junk at stream seq %d: ack %+v, err %v; want no ack and no error", seq, ack, err)
		}
	}
	malformed := func() uint64 {
		t.Helper()
		r, err := u.c.Rejects()
		if err != nil {
			t.Fatal(err)
		}
		return r[federated.ReasonMalformed]
	}
	junk(7)
	junk(7) // delivered again
	if n := malformed(); n != 1 {
		t.Fatalf("malformed counted %d times for one message delivered twice, want 1", n)
	}
	junk(8)
	if n := malformed(); n != 2 {
		t.Fatalf("malformed counted %d times for two messages, want 2", n)
	}
}

// normalCalibration is 100 rows of standard normal features (fixed seed):
// the calibration set of the unit tests' coordinators.
func normalCalibration(context.Context, *nn.Model) ([]float32, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]float32, 100*policy.NumFeatures)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	return rows, nil
}

// TestAggregateKeepsConstantInputsUnread: the base model does not read
// input 5, whose statistics are policy.MinStd's (its training found it
// constant); a site's update moves every weight, that row's included (an
// older agent, or data that varies the input), yet the aggregated model
// still does not read it, while it reads input 6 as before and its row
// moved.
func TestAggregateKeepsConstantInputsUnread(t *testing.T) {
	net, err := nn.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	s := policy.NewSchema()
	s.Std[5] = policy.MinStd
	mask := make([]bool, policy.NumFeatures)
	mask[5] = true
	net.MaskInputs(mask)
	base := &nn.Model{Schema: s, Net: net}
	u := newUnitWith(t, 1, base)
	_, got := u.publishedRound(t)
	m, err := u.c.FloatModel(got.Result)
	if err != nil {
		t.Fatal(err)
	}
	if m.Net.ReadsInput(5) || !m.Net.ReadsInput(6) {
		t.Fatalf("after the round: reads input 5 %v (want false), input 6 %v (want true)", m.Net.ReadsInput(5), m.Net.ReadsInput(6))
	}
	if before, after := base.Net.Flat()[6*4], m.Net.Flat()[6*4]; before == after {
		t.Fatalf("input 6's first weight did not move (%v): the update was not applied", before)
	}
}

// TestVersionsKeepInputBounds: a federation started from a model with
// input bounds (policy.Schema.Lo, Hi: every shipped model has them) makes
// every version with them, the first and a round's aggregate alike, in
// both signed artifacts; the aggregate's network moved, its bounds did
// not (no site's update can widen them).
func TestVersionsKeepInputBounds(t *testing.T) {
	net, err := nn.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	s := policy.NewSchema()
	s.Lo, s.Hi = make([]float32, policy.NumFeatures), make([]float32, policy.NumFeatures)
	for j := range s.Lo {
		s.Lo[j], s.Hi[j] = -1-float32(j)/10, 2+float32(j)/10
	}
	base := &nn.Model{Schema: s, Net: net}
	u := newUnitWith(t, 1, base)
	r, got := u.publishedRound(t)
	keys := &quant.Keyring{}
	if _, err := keys.Add(u.c.cfg.Signer.Public()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint64{r.BaseVersion, got.Result} {
		m, err := u.c.FloatModel(v)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Schema.Lo, s.Lo) || !slices.Equal(m.Schema.Hi, s.Hi) {
			t.Errorf("version %d's float model has bounds %v..%v, want the base model's", v, m.Schema.Lo, m.Schema.Hi)
		}
		var blob []byte
		if err := u.c.view(func(tx *bolt.Tx) error {
			blob = slices.Clone(tx.Bucket(store.BucketBlobs).Get(store.BlobKey(v, quant.Int8)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		a, err := quant.Decode(blob, quant.DecodeOptions{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Schema().Lo, s.Lo) || !slices.Equal(a.Schema().Hi, s.Hi) {
			t.Errorf("version %d's int8 artifact has bounds %v..%v, want the base model's", v, a.Schema().Lo, a.Schema().Hi)
		}
	}
	if m, _ := u.c.FloatModel(got.Result); slices.Equal(m.Net.Flat(), base.Net.Flat()) {
		t.Fatal("the aggregate's network did not move: the round was not applied")
	}
}

// reopen closes the unit's coordinator and opens its store again with
// the same configuration (the caller closes the new one).
func (u *unit) reopen(t *testing.T) *Coordinator {
	t.Helper()
	cfg := u.c.cfg
	u.c.Close()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("the store does not open again: %v", err)
	}
	return c
}
