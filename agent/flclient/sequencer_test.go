package flclient

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// memSequencer is an in-memory Sequencer for the client's logic: a site
// counter, the rounds queued and the staged copies (agent/site tests the
// real one against the API server).
type memSequencer struct {
	mu       sync.Mutex
	seq      uint64
	round    uint64
	staged   map[uint64][]byte
	done     []uint64
	inOut    func(seq uint64) bool // reports whether seq is already in the outbox, at Stage time
	stageErr error
}

func (m *memSequencer) Reserve(_ context.Context, round, after uint64, again bool) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !again && round <= m.round {
		return 0, ErrRoundQueued
	}
	m.seq = max(m.seq, after) + 1
	return m.seq, nil
}

func (m *memSequencer) Stage(_ context.Context, seq, round uint64, again bool, msg []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stageErr != nil {
		return m.stageErr
	}
	if !again && round <= m.round {
		return ErrRoundQueued
	}
	if m.inOut != nil && m.inOut(seq) {
		return errors.New("staged after the outbox commit")
	}
	m.round = max(m.round, round)
	if m.staged == nil {
		m.staged = map[uint64][]byte{}
	}
	m.staged[seq] = msg
	return nil
}

func (m *memSequencer) Done(_ context.Context, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.staged, seq)
	m.done = append(m.done, seq)
	return nil
}

func (c *Client) has(seq uint64) bool {
	var ok bool
	_ = c.db.View(func(tx *bolt.Tx) error { ok = tx.Bucket(bucketOutbox).Get(u64(seq)) != nil; return nil })
	return ok
}

// TestSequencerStagesBeforeCommit queues updates through a Sequencer: each
// is staged before it is in the outbox (the memSequencer refuses a stage
// whose sequence is already there), a drop-oldest eviction and a refused
// stage both tell the sequencer (Done), and a round the site already
// queued is not queued again.
func TestSequencerStagesBeforeCommit(t *testing.T) {
	base := strings.Repeat("ab", 32)
	cfg := testConfig(t)
	cfg.OutboxLimit = 2
	sq := &memSequencer{seq: 40} // another agent of the site went up to 40
	cfg.Sequencer = sq
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sq.inOut = c.has
	ctx := context.Background()
	for round := uint64(1); round <= 3; round++ {
		seq, err := sq.Reserve(ctx, round, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.enqueue(ctx, seq, round, false, base, 1, 10, []float32{1, 2, 3}, seq); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	// sequences 41, 42, 43; the limit of 2 dropped 41
	got, err := c.Outbox()
	if err != nil || !slices.Equal(got, []uint64{42, 43}) {
		t.Fatalf("outbox %v (%v), want [42 43]", got, err)
	}
	if !slices.Equal(sq.done, []uint64{41}) || len(sq.staged) != 2 {
		t.Fatalf("done %v, staged %d; want [41] and 2", sq.done, len(sq.staged))
	}
	if _, err := sq.Reserve(ctx, 3, 43, false); !errors.Is(err, ErrRoundQueued) {
		t.Fatalf("round 3 again: %v, want ErrRoundQueued", err)
	}
	// a stage the site refuses for the round: nothing queued, no error
	if err := c.enqueue(ctx, 44, 3, false, base, 1, 10, []float32{1, 2, 3}, 44); err != nil {
		t.Fatal(err)
	}
	if c.has(44) {
		t.Fatal("an update for a round the site already queued was queued")
	}
	// a failing stage: an error, nothing queued
	sq.stageErr = errors.New("apiserver down")
	if err := c.enqueue(ctx, 45, 4, false, base, 1, 10, []float32{1, 2, 3}, 45); err == nil || c.has(45) {
		t.Fatalf("failed stage: %v, queued %v", err, c.has(45))
	}
	sq.stageErr = nil
	// a sequence already in the outbox (the site ledger hands none out
	// twice; here the test reuses one) is refused by the commit and
	// un-staged
	sq.inOut = nil
	if err := c.enqueue(ctx, 43, 9, true, base, 1, 10, []float32{1, 2, 3}, 43); err == nil || !strings.Contains(err.Error(), "in the outbox already") {
		t.Fatalf("reused sequence: %v", err)
	}
	if sq.done[len(sq.done)-1] != 43 {
		t.Fatalf("the refused commit was not reported Done: %v", sq.done)
	}
	st, err := c.Status()
	if err != nil || st.Seq != 43 {
		t.Fatalf("status seq %d (%v), want 43", st.Seq, err)
	}
}

// TestAdoptAboveATrainingSequence: with a site ledger, an old leader's
// late update (sequence 8) is adopted while this agent trains the update
// it reserved sequence 7 for (site.Ledger.AdoptLate during a term); the
// update trained under 7 still queues, and the sequence stays at 8. It
// used to fail ("not above the outbox's 8") and be discarded. With the
// outbox full of entries above it (limit 1: only 8), drop-oldest does not
// queue it either, as refuse-new would not: counted and reported Done.
func TestAdoptAboveATrainingSequence(t *testing.T) {
	base := strings.Repeat("ab", 32)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		limit  int
		queued []uint64
	}{
		{"room", 4, []uint64{7, 8}},
		{"full of later entries", 1, []uint64{8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			late := staged(t, base, 8).staged[8] // a message of sequence 8, signed with the site's key
			cfg := testConfig(t)
			cfg.OutboxLimit = tc.limit
			sq := &memSequencer{seq: 6}
			cfg.Sequencer = sq
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			seq, err := sq.Reserve(ctx, 1, 0, false)
			if err != nil || seq != 7 {
				t.Fatalf("reserved %d (%v), want 7", seq, err)
			}
			if err := c.Adopt(ctx, 8, late); err != nil {
				t.Fatal(err)
			}
			if err := c.enqueue(ctx, seq, 1, false, base, 1, 10, []float32{1, 2, 3}, seq); err != nil {
				t.Fatalf("the update trained under 7: %v", err)
			}
			got, err := c.Outbox()
			st := mustStatus(t, c)
			if err != nil || !slices.Equal(got, tc.queued) || st.Seq != 8 {
				t.Fatalf("outbox %v, sequence %d (%v); want %v and 8", got, st.Seq, err, tc.queued)
			}
			if !slices.Contains(tc.queued, 7) && (!slices.Contains(sq.done, 7) || st.Counters.DroppedFull != 1) {
				t.Fatalf("7 not queued: done %v, %d dropped; want 7 reported Done and counted", sq.done, st.Counters.DroppedFull)
			}
		})
	}
}

// staged returns the Sequencer of another agent of the site that queued
// updates 1 to n (rounds 1 to n, trained from base), holding their
// signed messages.
func staged(t *testing.T, base string, n uint64) *memSequencer {
	t.Helper()
	cfg := testConfig(t)
	sq := &memSequencer{}
	cfg.Sequencer = sq
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := uint64(1); i <= n; i++ {
		if err := a.enqueue(context.Background(), i, i, false, base, 1, 10, []float32{float32(i), 0, 1}, i); err != nil {
			t.Fatal(err)
		}
	}
	return sq
}

// TestAdoptAndForget adopts another agent's staged update (verified: the
// site's signature and the sequence it claims), refuses forged or
// mismatched ones, and forgets delivered ones.
func TestAdoptAndForget(t *testing.T) {
	base := strings.Repeat("cd", 32)
	ctx := context.Background()
	sq := staged(t, base, 2)
	cfgB := testConfig(t) // same site and key, another data dir
	b, err := New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for seq, msg := range sq.staged {
		if err := b.Adopt(ctx, seq, msg); err != nil {
			t.Fatal(err)
		}
		if err := b.Adopt(ctx, seq, msg); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	got, _ := b.Outbox()
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("adopted %v, want [1 2]", got)
	}
	st, _ := b.Status()
	if st.Seq != 2 {
		t.Fatalf("adopting moved the sequence to %d, want 2", st.Seq)
	}
	// the same bytes under another sequence, a foreign key, garbage
	other, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{9}))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: cfgB.Site, Seq: 7, Round: 1, BaseModel: base, BaseVersion: 1, Samples: 1}, sq.staged[1][:0], other)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		seq uint64
		msg []byte
	}{"wrong sequence": {5, sq.staged[1]}, "foreign key": {7, forged}, "garbage": {8, []byte("ESUP")}} {
		if err := b.Adopt(ctx, tc.seq, tc.msg); !errors.Is(err, ErrAdopt) {
			t.Errorf("%s: %v, want ErrAdopt", name, err)
		}
	}
	if err := b.Forget(1, 99); err != nil {
		t.Fatal(err)
	}
	got, _ = b.Outbox()
	if !slices.Equal(got, []uint64{2}) {
		t.Fatalf("after Forget(1): %v, want [2]", got)
	}
	if _, _, err := b.InstalledInt8Bytes(); err == nil {
		t.Fatal("InstalledInt8Bytes with nothing installed: want an error")
	}
}

// TestAdoptRespectsOutboxLimit adopts another agent's updates 1, 2 and 3
// into an outbox of 2 (a new leader taking over a backlog): the outbox
// never holds more than its limit, and what finds no room is handled as
// for a new update, in the adopting transaction: drop-oldest drops the
// oldest entry (the adopted update itself when it is older than every
// entry: ErrOutboxFull), refuse-new takes nothing more (ErrOutboxFull).
// Every drop is counted (DroppedFull), logged and reported Done to the
// Sequencer; the sequence moves up to 3 either way. Before, Adopt put
// every update in, however full the outbox.
func TestAdoptRespectsOutboxLimit(t *testing.T) {
	ctx := context.Background()
	sqA := staged(t, strings.Repeat("ef", 32), 3)
	cases := []struct {
		name   string
		policy string
		order  []uint64 // adopted in this order
		full   []uint64 // adoptions that return ErrOutboxFull
		want   []uint64 // the outbox after
		done   []uint64 // reported Done to the Sequencer
	}{
		{"drop-oldest drops the oldest entry", DropOldest, []uint64{1, 2, 3}, nil, []uint64{2, 3}, []uint64{1}},
		{"drop-oldest drops an adopted update older than every entry", DropOldest, []uint64{2, 3, 1}, []uint64{1}, []uint64{2, 3}, []uint64{1}},
		{"refuse-new takes nothing more", RefuseNew, []uint64{1, 2, 3}, []uint64{3}, []uint64{1, 2}, []uint64{3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := testConfig(t) // same site and key, another data dir
			cfg.OutboxLimit, cfg.OutboxPolicy = 2, tc.policy
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			sq := &memSequencer{}
			cfg.Sequencer = sq
			b, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var full []uint64
			for _, seq := range tc.order {
				err := b.Adopt(ctx, seq, sqA.staged[seq])
				switch {
				case errors.Is(err, ErrOutboxFull):
					full = append(full, seq)
				case err != nil:
					t.Fatalf("adopt %d: %v", seq, err)
				}
				if n, _ := b.Outbox(); len(n) > cfg.OutboxLimit {
					t.Fatalf("after adopting %d the outbox holds %v, above its limit %d", seq, n, cfg.OutboxLimit)
				}
			}
			got, err := b.Outbox()
			if err != nil || !slices.Equal(got, tc.want) || !slices.Equal(full, tc.full) {
				t.Fatalf("outbox %v (%v), ErrOutboxFull for %v; want %v and %v", got, err, full, tc.want, tc.full)
			}
			st, err := b.Status()
			if err != nil || st.Counters.DroppedFull != 1 || st.Seq != 3 {
				t.Fatalf("status %+v (%v): want 1 dropped, sequence 3", st, err)
			}
			if !slices.Equal(sq.done, tc.done) {
				t.Fatalf("reported Done %v, want %v", sq.done, tc.done)
			}
			if n := strings.Count(logs.String(), `msg="outbox full`); n != 1 {
				t.Fatalf("%d outbox-full warnings, want 1:\n%s", n, logs.String())
			}
		})
	}
}
