package flclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/natstest"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// feed plays the coordinator's side of the model feed on a real embedded
// NATS server: it signs artifacts, puts them in the object store and the
// notice in the state bucket, exactly where the coordinator does.
type feed struct {
	t   *testing.T
	srv *server.Server
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore
	n   int // objects put (unique names)
}

func newFeed(t *testing.T) *feed {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamMaxStore: natstest.MaxStore, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	f := &feed{t: t, srv: srv}
	if f.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: federated.StateBucket, History: 1}); err != nil {
		t.Fatal(err)
	}
	if f.obj, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: federated.ModelBucket}); err != nil {
		t.Fatal(err)
	}
	return f
}

// model makes a model's float32 and int8 artifacts (seeded weights).
func (f *feed) artifacts(seed uint64, version uint64, created time.Time) (*quant.Artifact, *quant.Artifact) {
	t := f.t
	net, err := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(seed, 3)))
	if err != nil {
		t.Fatal(err)
	}
	m := &nn.Model{Schema: policy.NewSchema(), Net: net}
	info := quant.Info{Version: version, Created: created}
	fa, err := quant.FromModel(m.Float(), info)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 4))
	rows := make([]float32, 300*policy.NumFeatures)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	qa, err := quant.Quantize(m.Float(), rows, quant.DefaultCalibration(), info)
	if err != nil {
		t.Fatal(err)
	}
	return fa, qa
}

// offer is one published model: who signs it, how it is spoiled.
type offer struct {
	seed    uint64
	version uint64
	created time.Time
	signer  *quant.Signer
	// tamper edits the int8 artifact's bytes after signing; int8ID
	// overrides the model ID the notice names.
	tamper func([]byte)
	int8ID string
}

// publish puts an offer's artifacts and notice on the bus.
func (f *feed) publish(o offer) {
	t := f.t
	fa, qa := f.artifacts(o.seed, o.version, o.created)
	fb, err := fa.Encode(o.signer)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := qa.Encode(o.signer)
	if err != nil {
		t.Fatal(err)
	}
	if o.tamper != nil {
		o.tamper(qb)
	}
	id := qa.Header.ModelID
	if o.int8ID != "" {
		id = o.int8ID
	}
	f.put(fb, qb, o.version, fa.Header.ModelID, id)
}

// put puts encoded artifacts in the object store and a notice naming
// them (as version, with the model IDs given) in the state bucket.
func (f *feed) put(fb, qb []byte, version uint64, floatID, int8ID string) {
	t := f.t
	f.n++
	fo, qo := fmt.Sprintf("o%03d.float32.esa", f.n), fmt.Sprintf("o%03d.int8.esa", f.n)
	ctx := context.Background()
	if _, err := f.obj.PutBytes(ctx, fo, fb); err != nil {
		t.Fatal(err)
	}
	if _, err := f.obj.PutBytes(ctx, qo, qb); err != nil {
		t.Fatal(err)
	}
	raw, _ := federated.Marshal(federated.ModelNotice{V: federated.ProtocolVersion, Version: version, Round: version - 1,
		FloatModel: floatID, FloatObject: fo, Int8Model: int8ID, Int8Object: qo, Published: time.Now().UTC()})
	if _, err := f.kv.Put(ctx, federated.KeyModel, raw); err != nil {
		t.Fatal(err)
	}
}

// announce puts a round announcement naming base version v.
func (f *feed) announce(round, v uint64) {
	raw, _ := federated.Marshal(federated.RoundAnnouncement{V: federated.ProtocolVersion, Round: round, Mode: federated.Sync,
		BaseModel: fmt.Sprintf("%064x", v), BaseObject: fmt.Sprintf("v%06d.float32.esa", v), BaseVersion: v,
		MinUpdates: 1, Local: federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}})
	if _, err := f.kv.Put(context.Background(), federated.KeyRound, raw); err != nil {
		f.t.Fatal(err)
	}
}

// clock is a settable clock for the client.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// running is a client on the feed, stoppable and restartable on its
// store.
type running struct {
	c    *Client
	stop func()
}

func startClient(t *testing.T, f *feed, cfg Config) *running {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(f.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx, nc) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; nc.Close(); c.Close() }) }
	t.Cleanup(stop)
	return &running{c: c, stop: stop}
}

// waitFor polls the client's status until cond holds.
func waitFor(t *testing.T, c *Client, what string, cond func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Status()
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v %v", what, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestModelTrustRefusals: every model-trust rule, each a named case
// against a running client on a real NATS feed. The client installs a
// good version 2, then is offered, in turn, models it must refuse; each
// refusal is counted under its reason, the installed model stays version
// 2, and a good version 3 is still installed at the end (the client
// refuses what it must, not everything). Key rotation: the client trusts
// the new key and has the old one retired.
func TestModelTrustRefusals(t *testing.T) {
	f := newFeed(t)
	oldKey, _, _ := quant.GenerateKey(rand.NewChaCha8([32]byte{1}))
	newKey, _, _ := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	stranger, _, _ := quant.GenerateKey(rand.NewChaCha8([32]byte{3}))
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	now := clk.Now()
	cfg := testConfig(t)
	cfg.ModelKeys = trusting(t, newKey)
	if _, err := cfg.ModelKeys.Retire(oldKey.Public()); err != nil {
		t.Fatal(err)
	}
	cfg.MaxModelAge, cfg.Now, cfg.StatePoll = 24*time.Hour, clk.Now, 50*time.Millisecond
	cfg.BackoffMin, cfg.BackoffMax, cfg.ReportInterval = 10*time.Millisecond, 100*time.Millisecond, 0
	r := startClient(t, f, cfg)
	f.publish(offer{seed: 2, version: 2, created: now, signer: newKey})
	waitFor(t, r.c, "version 2 installed", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 2 })

	refused := func(s Status, reason string) int { return s.Counters.RefusedModelReasons[reason] }
	cases := []struct {
		name   string
		offer  offer
		reason string
		cause  error
	}{
		{"old version", offer{seed: 1, version: 1, created: now, signer: newKey}, RefuseRollback, quant.ErrRollback},
		{"same version, another model", offer{seed: 9, version: 2, created: now, signer: newKey}, RefuseConflict, quant.ErrRollback},
		{"wrong key", offer{seed: 3, version: 3, created: now, signer: stranger}, RefuseUnknownKey, quant.ErrUnknownKey},
		{"retired key", offer{seed: 3, version: 3, created: now, signer: oldKey}, RefuseRetiredKey, quant.ErrRetiredKey},
		{"tampered payload", offer{seed: 3, version: 3, created: now, signer: newKey, tamper: func(b []byte) { b[len(b)-100] ^= 1 }}, RefuseSignature, quant.ErrSignature},
		{"notice names another model", offer{seed: 3, version: 3, created: now, signer: newKey, int8ID: fmt.Sprintf("%064x", 7)}, RefuseMismatch, errArtifactMismatch},
		{"stale model claiming to be current", offer{seed: 3, version: 3, created: now.Add(-48 * time.Hour), signer: newKey}, RefuseStale, quant.ErrStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := r.c.Status()
			f.publish(tc.offer)
			st := waitFor(t, r.c, tc.reason+" refusal", func(s Status) bool { return refused(s, tc.reason) > refused(before, tc.reason) })
			if st.Installed == nil || st.Installed.Version != 2 {
				t.Fatalf("installed %+v after a refused model, want version 2", st.Installed)
			}
			t.Logf("refused: %s", st.Counters.LastRefusal)
			// the refusal is the typed error with its cause
			err := r.c.install(context.Background(), mustJS(t, f), lastNotice(t, f), false)
			var mr *ModelRefusal
			if !errors.As(err, &mr) || mr.Reason != tc.reason || !errors.Is(err, tc.cause) || !errors.Is(err, ErrModelRefused) {
				t.Fatalf("install returned %v, want a %s refusal caused by %v", err, tc.reason, tc.cause)
			}
		})
	}
	parent := t
	t.Run("restart then old version", func(t *testing.T) {
		r.stop()
		r = startClient(parent, f, cfg)
		before, _ := r.c.Status()
		f.publish(offer{seed: 1, version: 1, created: now, signer: newKey})
		st := waitFor(t, r.c, "rollback refusal after restart", func(s Status) bool { return refused(s, RefuseRollback) > refused(before, RefuseRollback) })
		if st.Installed.Version != 2 {
			t.Fatalf("installed version %d after restart, want 2", st.Installed.Version)
		}
		ts, err := r.c.TrustStatus()
		if err != nil || ts.HighestVersion != 2 {
			t.Fatalf("trust status after restart %+v %v, want highest version 2", ts, err)
		}
	})
	t.Run("good version 3 still installs", func(t *testing.T) {
		f.publish(offer{seed: 3, version: 3, created: now, signer: newKey})
		waitFor(t, r.c, "version 3", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 3 })
	})
}

func mustJS(t *testing.T, f *feed) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(f.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func lastNotice(t *testing.T, f *feed) *federated.ModelNotice {
	t.Helper()
	e, err := f.kv.Get(context.Background(), federated.KeyModel)
	if err != nil {
		t.Fatal(err)
	}
	n, err := federated.DecodeModelNotice(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFreezeDetection: the two freeze rules, on the client's clock. Rounds
// naming a base version the site cannot install for longer than
// FreezeAfter, and an installed model older than MaxModelAge, each make
// the site report itself frozen (counted once); a new model ends it.
func TestFreezeDetection(t *testing.T) {
	f := newFeed(t)
	key, _, _ := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	cfg := testConfig(t)
	cfg.ModelKeys = trusting(t, key)
	cfg.MaxModelAge, cfg.FreezeAfter, cfg.Now, cfg.StatePoll = 24*time.Hour, time.Hour, clk.Now, 50*time.Millisecond
	cfg.BackoffMin, cfg.BackoffMax, cfg.ReportInterval = 10*time.Millisecond, 100*time.Millisecond, 0
	r := startClient(t, f, cfg)
	f.publish(offer{seed: 2, version: 2, created: clk.Now(), signer: key})
	waitFor(t, r.c, "version 2 installed", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 2 })
	frozen := func() *Freeze {
		ts, err := r.c.TrustStatus()
		if err != nil {
			t.Fatal(err)
		}
		return ts.Frozen
	}
	t.Run("not frozen while current", func(t *testing.T) {
		if fz := frozen(); fz != nil {
			t.Fatalf("frozen: %+v", fz)
		}
	})
	t.Run("rounds move on while the model does not", func(t *testing.T) {
		// round 5 trains from version 4; the site never gets version 4
		f.announce(5, 4)
		deadline := time.Now().Add(10 * time.Second)
		for {
			ts, _ := r.c.TrustStatus()
			if ts.Announced == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("announcement not recorded: %+v", ts)
			}
			time.Sleep(10 * time.Millisecond)
		}
		clk.Add(59 * time.Minute)
		if fz := frozen(); fz != nil {
			t.Fatalf("frozen before FreezeAfter: %+v", fz)
		}
		clk.Add(2 * time.Minute) // 61 minutes > FreezeAfter of 60
		fz := frozen()
		if fz == nil || fz.Reason != FrozenBehind {
			t.Fatalf("freeze %+v, want %s", fz, FrozenBehind)
		}
		waitFor(t, r.c, "the freeze counted", func(s Status) bool { return s.Counters.Freezes >= 1 })
	})
	t.Run("a new model ends the freeze", func(t *testing.T) {
		f.publish(offer{seed: 4, version: 4, created: clk.Now(), signer: key})
		waitFor(t, r.c, "version 4", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 4 })
		if fz := frozen(); fz != nil {
			t.Fatalf("still frozen: %+v", fz)
		}
	})
	t.Run("installed model ages past MaxModelAge", func(t *testing.T) {
		clk.Add(25 * time.Hour)
		fz := frozen()
		if fz == nil || fz.Reason != FrozenAged {
			t.Fatalf("freeze %+v, want %s", fz, FrozenAged)
		}
	})
}

// TestHWMMigration: a store written before the high-water mark existed
// gets it from its installed model at open, so the upgrade does not
// reopen the door to older versions.
func TestHWMMigration(t *testing.T) {
	cfg := testConfig(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Delete(keyModelHWM); err != nil {
			return err
		}
		return tx.Bucket(bucketModels).Put(keyInstalled, []byte(`{"version":7,"int8_model":"abc"}`))
	}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ts, err := c.TrustStatus()
	if err != nil || ts.HighestVersion != 7 || ts.HighestInt8 != "abc" {
		t.Fatalf("after migration %+v %v, want highest version 7", ts, err)
	}
}

// TestOldModelMarks: an agent.db whose marks the agent wrote before
// quant.Floor (quant/testdata/mark-agent-*.json: the old encoder's bytes
// for an install of version 9, int8 model 8e…8e, and an announcement of
// base version 11 seen at 12:00:00.987654321+01:00) reads as it did: the
// high-water mark refuses older and conflicting notices, and the freeze
// rule counts from the announcement's first sighting.
func TestOldModelMarks(t *testing.T) {
	seen := time.Date(2026, 11, 30, 12, 0, 0, 987654321, time.FixedZone("CET", 3600))
	int8ID := strings.Repeat("8e", 32)
	cfg := testConfig(t)
	cfg.FreezeAfter = time.Hour
	cfg.Now = func() time.Time { return seen.Add(2 * time.Hour) }
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for key, file := range map[string]string{string(keyModelHWM): "mark-agent-hwm.json", string(keyAnnounced): "mark-agent-announced.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "quant", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte(key), raw) }); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ts, err := c.TrustStatus()
	if err != nil {
		t.Fatal(err)
	}
	if ts.HighestVersion != 9 || ts.HighestInt8 != int8ID || ts.Announced != 11 {
		t.Fatalf("trust status %+v, want highest version 9 (%s), announced 11", ts, int8ID)
	}
	if ts.Frozen == nil || ts.Frozen.Reason != FrozenBehind || !ts.Frozen.Since.Equal(seen.Add(cfg.FreezeAfter)) {
		t.Fatalf("freeze %+v, want %s since %s", ts.Frozen, FrozenBehind, seen.Add(cfg.FreezeAfter))
	}
	for _, tc := range []struct {
		name   string
		notice federated.ModelNotice
		reason string
	}{
		{"older version", federated.ModelNotice{Version: 8, Int8Model: strings.Repeat("11", 32)}, RefuseRollback},
		{"same version, another model", federated.ModelNotice{Version: 9, Int8Model: strings.Repeat("22", 32)}, RefuseConflict},
		{"the installed model again", federated.ModelNotice{Version: 9, Int8Model: int8ID}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.install(t.Context(), nil, &tc.notice, false)
			var r *ModelRefusal
			switch {
			case tc.reason == "" && err != nil:
				t.Fatalf("install: %v, want a no-op", err)
			case tc.reason != "" && (!errors.As(err, &r) || r.Reason != tc.reason):
				t.Fatalf("install: %v, want a %s refusal", err, tc.reason)
			}
		})
	}
}
