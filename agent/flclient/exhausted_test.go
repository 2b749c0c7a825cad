package flclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// TestSequenceExhausted: a client whose newest sequence is at
// federated.MaxSeq or above (a store from a damaged disk, or a sequence
// adopted from elsewhere) trains no more: trainRound returns
// ErrSequenceExhausted naming the site, before fetching or training, and
// the outbox, the sequence and the counters are as they were (it used to
// queue MaxSeq+1, which the coordinator refuses, or wrap to 0). The last
// usable sequence, MaxSeq, is still queued; a Sequencer that hands out a
// sequence above MaxSeq is refused the same way, nothing queued.
func TestSequenceExhausted(t *testing.T) {
	key, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	if err != nil {
		t.Fatal(err)
	}
	f := newFeed(t)
	fa, _ := f.artifacts(5, 2, time.Now())
	fb, err := fa.Encode(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.obj.PutBytes(context.Background(), "base.float32.esa", fb); err != nil {
		t.Fatal(err)
	}
	base, err := nn.FromArtifact(fa)
	if err != nil {
		t.Fatal(err)
	}
	js := mustJS(t, f)
	a := &federated.RoundAnnouncement{V: federated.ProtocolVersion, Round: 2, Mode: federated.Sync, BaseModel: fa.Header.ModelID,
		BaseObject: "base.float32.esa", BaseVersion: 2, Opened: time.Now().UTC(), Deadline: time.Now().Add(time.Hour).UTC(),
		MinUpdates: 1, Local: federated.LocalTraining{Iterations: 1, Episodes: 1, LR: 1e-3}}

	for _, tc := range []struct {
		name      string
		local     uint64        // the client's newest sequence
		sequencer *memSequencer // nil: a single-agent site
		want      uint64        // the sequence queued; 0: none
		wantErr   string        // with want 0: what the error says
	}{
		{"single agent at MaxSeq", federated.MaxSeq, nil, 0, "site store-1: " + ErrSequenceExhausted.Error()},
		{"single agent above MaxSeq", federated.MaxSeq + 1, nil, 0, "site store-1: " + ErrSequenceExhausted.Error()},
		{"single agent at the top of uint64", math.MaxUint64, nil, 0, "site store-1: " + ErrSequenceExhausted.Error()},
		{"single agent just below MaxSeq", federated.MaxSeq - 1, nil, federated.MaxSeq, ""},
		{"sequencer past MaxSeq", 9, &memSequencer{seq: federated.MaxSeq}, 0, "sequencer returned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig(t)
			if _, err := cfg.ModelKeys.Add(key.Public()); err != nil {
				t.Fatal(err)
			}
			cfg.Trainer = &SyntheticTrainer{Target: make([]float32, base.Net.NumParams()), Rate: 0.5, Samples: 10}
			if tc.sequencer != nil {
				cfg.Sequencer = tc.sequencer
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// an unsent update of round 1, then the sequence where the case wants it
			if err := c.enqueue(ctx, 7, 1, false, fa.Header.ModelID, 2, 10, make([]float32, base.Net.NumParams()), 7); err != nil {
				t.Fatal(err)
			}
			if err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySeq, u64(tc.local)) }); err != nil {
				t.Fatal(err)
			}
			before := mustStatus(t, c)

			err = c.trainRound(ctx, js, a, false)
			st := mustStatus(t, c)
			queued, oerr := c.Outbox()
			if oerr != nil {
				t.Fatal(oerr)
			}
			if tc.want != 0 {
				if err != nil || st.Seq != tc.want || !slices.Equal(queued, []uint64{7, tc.want}) {
					t.Fatalf("trained above %d: %v, sequence %d, outbox %v; want %d queued after 7", tc.local, err, st.Seq, queued, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("trained above %d: %v (sequence now %d, outbox %v); want an error saying %q", tc.local, err, st.Seq, queued, tc.wantErr)
			}
			if tc.sequencer == nil && !errors.Is(err, ErrSequenceExhausted) {
				t.Fatalf("%v does not wrap ErrSequenceExhausted", err)
			}
			if st.Seq != tc.local || st.Counters.Trained != before.Counters.Trained || !slices.Equal(queued, []uint64{7}) {
				t.Fatalf("after the refusal: sequence %d, %d trained, outbox %v; want %d, %d, [7]", st.Seq, st.Counters.Trained, queued, tc.local, before.Counters.Trained)
			}
		})
	}
}

// TestRetryTraining: a failed sync round is trained again before its
// deadline, an async one is not (its timer trains it), and an exhausted
// sequence or a damaged base object never is (it would fail the same way
// at every backoff).
func TestRetryTraining(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	sync := &federated.RoundAnnouncement{Mode: federated.Sync, Deadline: now.Add(time.Minute)}
	exhausted := errors.Join(errors.New("site s1"), ErrSequenceExhausted)
	for _, tc := range []struct {
		name string
		a    *federated.RoundAnnouncement
		err  error
		now  time.Time
		want bool
	}{
		{"sync before the deadline", sync, errors.New("fetch base model: timeout"), now, true},
		{"sync after the deadline", sync, errors.New("timeout"), now.Add(2 * time.Minute), false},
		{"async", &federated.RoundAnnouncement{Mode: federated.Async, Deadline: now.Add(time.Minute)}, errors.New("timeout"), now, false},
		{"sequence exhausted", sync, exhausted, now, false},
		// the store holds the base object damaged: fetching it again
		// cannot help (it used to be downloaded again at every backoff)
		{"damaged base object", sync, fmt.Errorf("fetch base.float32.esa: %w: object base.float32.esa: digest X, its content hashes to Y", errDamagedObject), now, false},
	} {
		if got := retryTraining(tc.a, tc.err, tc.now); got != tc.want {
			t.Errorf("%s: retry %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReplayAckCatchUp: a replay ack carrying the coordinator's
// high-water mark above this store's newest sequence moves the sequence
// up to it (the store was lost or restored from an old copy), so the next
// update is above it; a mark more than maxSeqCatchUp ahead moves it
// maxSeqCatchUp (a step: the next replay's ack moves it on, where such a
// mark used to be ignored and the site refused for ever); an ack whose
// mark is not above the store's, of a sequence this store never used,
// another site's, or an accepted one, changes nothing. The counters count
// the ack either way. An update trained meanwhile with the sequence
// reserved before the ack (local+1) is still queued: it used to fail
// ("not above the outbox's"), and with a site ledger the round was then
// skipped.
func TestReplayAckCatchUp(t *testing.T) {
	const local = 5
	replay := func(seq, hwm uint64) federated.Ack {
		return federated.Ack{V: federated.ProtocolVersion, Site: "store-1", Seq: seq, Round: 3, Status: federated.Duplicate, Reason: federated.ReasonReplay, HWM: hwm}
	}
	other := replay(1, 40)
	other.Site = "store-2"
	for _, tc := range []struct {
		name    string
		ack     federated.Ack
		wantSeq uint64
		caught  int
	}{
		{"mark ahead: caught up", replay(1, 40), 40, 1},
		{"mark at the bound", replay(1, local+maxSeqCatchUp), local + maxSeqCatchUp, 1},
		{"mark past the bound: one step", replay(1, local+maxSeqCatchUp+1), local + maxSeqCatchUp, 1},
		{"of a sequence this store never used: ignored", replay(local+1, 40), local, 0},
		{"mark at MaxSeq: one step", replay(1, federated.MaxSeq), local + maxSeqCatchUp, 1},
		{"mark equal to the store's", replay(2, local), local, 0},
		{"mark below the store's (an old replay)", replay(2, 3), local, 0},
		{"replay without a mark (an older coordinator)", replay(2, 0), local, 0},
		{"another site's ack", other, local, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(testConfig(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySeq, u64(local)) }); err != nil {
				t.Fatal(err)
			}
			raw, err := federated.Marshal(tc.ack)
			if err != nil {
				t.Fatal(err)
			}
			c.onAck(&nats.Msg{Data: raw})
			st := mustStatus(t, c)
			wantDup := 1
			if tc.ack.Site != "store-1" {
				wantDup = 0
			}
			if st.Seq != tc.wantSeq || st.Counters.SequenceCatchUps != tc.caught || st.Counters.Duplicate != wantDup {
				t.Fatalf("sequence %d, %d catch-ups, %d duplicates; want %d, %d, %d", st.Seq, st.Counters.SequenceCatchUps, st.Counters.Duplicate, tc.wantSeq, tc.caught, wantDup)
			}
			// an update trained with the sequence reserved before the ack
			if err := c.enqueue(context.Background(), local+1, 3, false, strings.Repeat("ab", 32), 1, 10, make([]float32, 8), 1); err != nil {
				t.Fatalf("the update trained meanwhile: %v", err)
			}
			if st := mustStatus(t, c); st.Seq != max(tc.wantSeq, local+1) {
				t.Fatalf("after it: sequence %d, want %d", st.Seq, max(tc.wantSeq, local+1))
			}
		})
	}
}
