package flclient

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

	"github.com/edgesched/edgesched/quant"
)

// trusting is a keyring that trusts key alone.
func trusting(t *testing.T, key *quant.Signer) *quant.Keyring {
	t.Helper()
	k := &quant.Keyring{}
	if _, err := k.Add(key.Public()); err != nil {
		t.Fatal(err)
	}
	return k
}

func testConfig(t *testing.T) Config {
	t.Helper()
	signer, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{7}))
	if err != nil {
		t.Fatal(err)
	}
	coord, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{8}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Site, cfg.Signer, cfg.DataDir = "store-1", signer, t.TempDir()
	cfg.ModelKeys = &quant.Keyring{}
	if _, err := cfg.ModelKeys.Add(coord.Public()); err != nil {
		t.Fatal(err)
	}
	cfg.Trainer = &SyntheticTrainer{Rate: 1, Samples: 1}
	return cfg
}

// TestOutboxFullPolicies fills a 3-entry outbox with 5 updates (no link,
// so nothing drains): drop-oldest keeps sequences 3..5 and counts 2
// drops; refuse-new keeps 1..3, makes no sequence 4 or 5 and counts 2
// refusals. Both counts survive a reopen of the store.
func TestOutboxFullPolicies(t *testing.T) {
	base := strings.Repeat("ab", 32)
	cases := []struct {
		policy   string
		wantSeqs []uint64
		wantSeq  uint64
	}{
		{DropOldest, []uint64{3, 4, 5}, 5},
		{RefuseNew, []uint64{1, 2, 3}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.OutboxLimit, cfg.OutboxPolicy = 3, tc.policy
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if err := c.enqueue(context.Background(), uint64(i+1), 1, false, base, 1, 10, []float32{0.5, -0.25, float32(i)}, uint64(i)); err != nil {
					t.Fatal(err)
				}
			}
			var seqs []uint64
			for range 3 {
				seq, msg := c.oldest()
				if msg == nil {
					break
				}
				seqs = append(seqs, seq)
				if err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOutbox).Delete(u64(seq)) }); err != nil {
					t.Fatal(err)
				}
			}
			if len(seqs) != 3 || seqs[0] != tc.wantSeqs[0] || seqs[2] != tc.wantSeqs[2] {
				t.Fatalf("outbox held %v, want %v", seqs, tc.wantSeqs)
			}
			c.Close()
			c, err = New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st, err := c.Status()
			if err != nil {
				t.Fatal(err)
			}
			if st.Counters.DroppedFull != 2 || st.Seq != tc.wantSeq {
				t.Fatalf("after reopen: %d dropped, seq %d; want 2 and %d", st.Counters.DroppedFull, st.Seq, tc.wantSeq)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"site", func(c *Config) { c.Site = "Store_1" }, "Site"},
		{"signer", func(c *Config) { c.Signer = nil }, "Signer"},
		{"model keys", func(c *Config) { c.ModelKeys = &quant.Keyring{} }, "ModelKeys"},
		{"data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"trainer", func(c *Config) { c.Trainer = nil }, "Trainer"},
		{"outbox limit", func(c *Config) { c.OutboxLimit = 0 }, "OutboxLimit"},
		{"outbox policy", func(c *Config) { c.OutboxPolicy = "keep-all" }, "OutboxPolicy"},
		{"chunk", func(c *Config) { c.ChunkSize = 0 }, "ChunkSize"},
		{"backoff", func(c *Config) { c.BackoffMax = c.BackoffMin / 2 }, "backoff"},
		{"report interval", func(c *Config) { c.ReportInterval = -1 }, "backoff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig naming %s", err, tc.want)
			}
		})
	}
	c := testConfig(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// stuckLedger is a Sequencer whose Stage blocks until released, like the
// site ledger's ConfigMap write against a slow apiserver; it records the
// order of the staged sequences.
type stuckLedger struct {
	entered chan uint64   // Stage's sequence, sent on entry
	release chan struct{} // one receive per Stage
	mu      sync.Mutex
	staged  []uint64
}

func (l *stuckLedger) Reserve(_ context.Context, _, after uint64, _ bool) (uint64, error) {
	return after + 1, nil
}

func (l *stuckLedger) Stage(ctx context.Context, seq, _ uint64, _ bool, _ []byte) error {
	l.entered <- seq
	select {
	case <-l.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.staged = append(l.staged, seq)
	return nil
}

func (l *stuckLedger) Done(context.Context, uint64) error { return nil }

// TestEnqueueDoesNotBlockOtherMethods: while the ledger's call of one
// enqueue is stuck, the client's other methods (OnModel, which takes the
// client's lock; Status, Outbox) return at once; a second enqueue waits
// for the first, and both land in the outbox in sequence order.
func TestEnqueueDoesNotBlockOtherMethods(t *testing.T) {
	cfg := testConfig(t)
	ledger := &stuckLedger{entered: make(chan uint64, 2), release: make(chan struct{})}
	cfg.Sequencer = ledger
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := strings.Repeat("cd", 32)
	errs := make(chan error, 2)
	enqueue := func(seq uint64) {
		errs <- c.enqueue(ctx, seq, seq, false, base, 1, 10, []float32{0.5, -0.25, float32(seq)}, seq)
	}
	go enqueue(1)
	deadline := time.After(10 * time.Second)
	select {
	case seq := <-ledger.entered:
		if seq != 1 {
			t.Fatalf("staged %d first, want 1", seq)
		}
	case <-deadline:
		t.Fatal("the first update never reached the ledger")
	}
	// The ledger call of sequence 1 is stuck: the other methods answer.
	others := make(chan error, 1)
	go func() {
		c.OnModel(func(Installed) {})
		if _, err := c.Status(); err != nil {
			others <- err
			return
		}
		_, err := c.Outbox()
		others <- err
	}()
	select {
	case err := <-others:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnModel/Status/Outbox blocked for 5 s behind a stuck ledger call")
	}
	// A second enqueue waits behind the first (one at a time, in order):
	// while sequence 1 is stuck, sequence 2 must not reach the ledger. A
	// negative, so watched over a window (300 ms) rather than polled.
	go enqueue(2)
	select {
	case seq := <-ledger.entered:
		t.Fatalf("sequence %d reached the ledger while sequence 1's call was stuck", seq)
	case <-time.After(300 * time.Millisecond):
	}
	ledger.release <- struct{}{} // sequence 1 staged
	select {
	case seq := <-ledger.entered:
		if seq != 2 {
			t.Fatalf("staged %d second, want 2", seq)
		}
	case <-deadline:
		t.Fatal("the second update never reached the ledger")
	}
	ledger.release <- struct{}{}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Outbox()
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	ledger.mu.Lock()
	staged := slices.Clone(ledger.staged)
	ledger.mu.Unlock()
	if !slices.Equal(got, []uint64{1, 2}) || !slices.Equal(staged, []uint64{1, 2}) || st.Seq != 2 {
		t.Fatalf("outbox %v, staged %v, seq %d; want [1 2], [1 2], 2", got, staged, st.Seq)
	}
}

// TestNoModelSentinel: with nothing installed, InstalledInt8Bytes and
// InstalledInt8 return ErrNoModel (what the model installer waits on);
// TrustStatus has no model creation time.
func TestNoModelSentinel(t *testing.T) {
	c, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if inst, raw, err := c.InstalledInt8Bytes(); !errors.Is(err, ErrNoModel) || inst != nil || raw != nil {
		t.Fatalf("InstalledInt8Bytes: %v, %v, %v; want nil, nil, ErrNoModel", inst, raw, err)
	}
	if _, _, err := c.InstalledInt8(); !errors.Is(err, ErrNoModel) {
		t.Fatalf("InstalledInt8: %v, want ErrNoModel", err)
	}
	s, err := c.TrustStatus()
	if err != nil || !s.ModelCreated.IsZero() {
		t.Fatalf("TrustStatus: %+v, %v; want no model creation time", s, err)
	}
}

// TestResidualOfAnotherShape: after the model's parameter count changed
// (a model that now carries its GraphSAGE weights), the saved
// error-feedback residual belongs to the old layout: the next update is
// made without it instead of failing every round, and the residual
// saved with it has the new length (also after a reopen).
func TestResidualOfAnotherShape(t *testing.T) {
	base := strings.Repeat("ab", 32)
	cfg := testConfig(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.enqueue(context.Background(), 1, 1, false, base, 1, 10, []float32{0.5, -0.25, 0.3}, 1); err != nil {
		t.Fatal(err)
	}
	if n := len(c.residual.Values()); n != 3 {
		t.Fatalf("residual of %d values after a 3-value update", n)
	}
	if err := c.enqueue(context.Background(), 2, 2, false, base, 1, 10, []float32{0.5, -0.25, 0.3, 0.125, 1}, 2); err != nil {
		t.Fatalf("an update of the new shape: %v", err)
	}
	c.Close()
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := len(c.residual.Values()); n != 5 {
		t.Fatalf("residual of %d values after reopening, want the new shape's 5", n)
	}
}
