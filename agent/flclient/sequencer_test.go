package flclient

import (
	"context"
	"errors"
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
	// a sequence not above the outbox's own is refused by the commit and
	// un-staged
	sq.inOut = nil
	if err := c.enqueue(ctx, 43, 9, true, base, 1, 10, []float32{1, 2, 3}, 43); err == nil || !strings.Contains(err.Error(), "not above") {
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

// TestAdoptAndForget adopts another agent's staged update (verified: the
// site's signature and the sequence it claims), refuses forged or
// mismatched ones, and forgets delivered ones.
func TestAdoptAndForget(t *testing.T) {
	base := strings.Repeat("cd", 32)
	cfgA := testConfig(t)
	sq := &memSequencer{}
	cfgA.Sequencer = sq
	a, err := New(cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	for i := uint64(1); i <= 2; i++ {
		if err := a.enqueue(ctx, i, i, false, base, 1, 10, []float32{float32(i), 0, 1}, i); err != nil {
			t.Fatal(err)
		}
	}
	cfgB := testConfig(t) // same site and key, another data dir
	b, err := New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for seq, msg := range sq.staged {
		if err := b.Adopt(seq, msg); err != nil {
			t.Fatal(err)
		}
		if err := b.Adopt(seq, msg); err != nil { // idempotent
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
		if err := b.Adopt(tc.seq, tc.msg); !errors.Is(err, ErrAdopt) {
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
