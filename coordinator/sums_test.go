package coordinator

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/ingest"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

const sumSites = 6

// sumRig is a coordinator of sumSites sites on dir; open makes it again
// on the same store (a restart).
type sumRig struct {
	t     *testing.T
	dir   string
	keys  []*quant.Signer
	clock *fakeClock
	cfg   Config
	c     *Coordinator
}

func newSumRig(t *testing.T, payloads bool) *sumRig {
	t.Helper()
	s := &sumRig{t: t, dir: t.TempDir(), clock: &fakeClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}}
	reg := &federated.Registry{}
	for i := range sumSites {
		k := testKey(t, byte(20+i))
		s.keys = append(s.keys, k)
		if err := reg.Add(fmt.Sprintf("site-%d", i), k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.Clock = s.dir, reg, testKey(t, 9), s.clock
	cfg.Calibrate = normalCalibration
	cfg.MinUpdates, cfg.RoundDuration, cfg.StorePayloads = sumSites, time.Hour, payloads
	s.cfg = cfg
	s.open()
	net, err := nn.NewNet(policy.NumFeatures, 8, 8, 8, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Bootstrap(context.Background(), &nn.Model{Schema: policy.NewSchema(), Net: net}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *sumRig) open() {
	s.t.Helper()
	if s.c != nil {
		s.c.Close()
	}
	c, err := New(s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.c = c
	s.t.Cleanup(func() { c.Close() })
}

// updates are every site's signed update of round r: random deltas of
// different sizes (site 5's above the clip norm), different sample
// counts, int8 with different chunk sizes except site 4's (float32).
func (s *sumRig) updates(r *Round) [][]byte {
	s.t.Helper()
	m, err := s.c.FloatModel(r.BaseVersion)
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([][]byte, sumSites)
	for i := range sumSites {
		rng := rand.New(rand.NewPCG(uint64(i), r.Round))
		sd := 0.01 * float64(i+1)
		if i == 5 {
			sd = 2 // norm far above DefaultClipNorm: clipped
		}
		delta := make([]float32, m.Net.NumParams())
		for j := range delta {
			delta[j] = float32(sd * rng.NormFloat64())
		}
		opt := esu.DefaultOptions(uint64(i))
		opt.ChunkSize = 16 + 50*i
		if i == 4 {
			opt.Encoding = esu.Float32
		}
		payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: delta}, opt)
		if err != nil {
			s.t.Fatal(err)
		}
		out[i], err = federated.EncodeUpdateMsg(federated.UpdateHeader{V: federated.ProtocolVersion, Site: fmt.Sprintf("site-%d", i), Seq: r.Round,
			Round: r.Round, BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: int64(10 + 37*i), Created: s.clock.Now()}, payload, s.keys[i])
		if err != nil {
			s.t.Fatal(err)
		}
	}
	return out
}

// judgeGroup judges msgs as one group (one transaction), as ingest does.
func (s *sumRig) judgeGroup(msgs ...[]byte) {
	s.t.Helper()
	group := make([]*ingest.Incoming, len(msgs))
	for i, m := range msgs {
		group[i] = &ingest.Incoming{Data: m, StreamSeq: uint64(1000 + i)}
	}
	s.c.verifyAll(group)
	for len(group) > 0 {
		n, err := s.c.judge(context.Background(), group)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, in := range group[:n] {
			if in.Ack == nil || in.Ack.Status != federated.Accepted {
				s.t.Fatalf("update %+v: %v", in.Ack, in.Err)
			}
		}
		group = group[n:]
	}
}

// newest is the newest model record and its float weights.
func (s *sumRig) newest() (*Model, []float32) {
	s.t.Helper()
	rec, err := s.c.ModelRecord(0)
	if err != nil {
		s.t.Fatal(err)
	}
	m, err := s.c.FloatModel(rec.Version)
	if err != nil {
		s.t.Fatal(err)
	}
	return rec, m.Net.Flat()
}

// TestSummingRoundOrderAndRestart: a FedAvg round keeps running sums, not
// payloads (stored updates of format 2, a sums record), and makes the
// bit-identical model (same content IDs) whether its updates come one by
// one in site order or grouped and shuffled with the coordinator
// restarted in the middle (the sums read back from the store). The
// model agrees with the same round storing payloads to float32
// precision, and the round's statistics (norms, clipped, weights) are
// the same.
func TestSummingRoundOrderAndRestart(t *testing.T) {
	ctx := context.Background()
	run := func(payloads bool, feed func(s *sumRig, msgs [][]byte)) (*sumRig, *Round) {
		s := newSumRig(t, payloads)
		r, err := s.c.StartRound(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if (r.Sum != nil) == payloads {
			t.Fatalf("payloads %v: round sum spec %+v", payloads, r.Sum)
		}
		feed(s, s.updates(r))
		got, err := s.c.RoundRecord(r.Round)
		if err != nil || got.State != StatePublished {
			t.Fatalf("round %+v %v, want published", got, err)
		}
		return s, got
	}
	a, ra := run(false, func(s *sumRig, msgs [][]byte) {
		for _, m := range msgs {
			s.judgeGroup(m)
		}
	})
	b, rb := run(false, func(s *sumRig, msgs [][]byte) {
		s.judgeGroup(msgs[4], msgs[1], msgs[5])
		// what is stored: headers and norms, and the sums
		err := s.c.view(func(tx *bolt.Tx) error {
			n := 0
			err := tx.Bucket(store.BucketUpdates).Bucket(u64(1)).ForEach(func(k, v []byte) error {
				u, err := store.DecodeStoredUpdate(v, string(k))
				if err == nil && (!u.Summed || u.Payload != nil) {
					err = fmt.Errorf("stored update %s: summed %v, %d payload bytes", k, u.Summed, len(u.Payload))
				}
				n++
				return err
			})
			if err == nil && (n != 3 || tx.Bucket(store.BucketSums).Get(u64(1)) == nil) {
				err = fmt.Errorf("%d stored updates, sums %v", n, tx.Bucket(store.BucketSums).Get(u64(1)) != nil)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		s.open() // a restart: the sums come back from the store
		s.judgeGroup(msgs[3])
		s.judgeGroup(msgs[0], msgs[2])
	})
	p, rp := run(true, func(s *sumRig, msgs [][]byte) { s.judgeGroup(msgs...) })

	ma, wa := a.newest()
	mb, wb := b.newest()
	if ma.FloatModel != mb.FloatModel || ma.Int8Model != mb.Int8Model {
		t.Fatalf("models differ: in order %s/%s, shuffled with a restart %s/%s", ma.FloatModel[:12], ma.Int8Model[:12], mb.FloatModel[:12], mb.Int8Model[:12])
	}
	_, wp := p.newest()
	for i := range wa {
		if d := math.Abs(float64(wa[i] - wp[i])); d > 1e-6*max(1, math.Abs(float64(wp[i]))) {
			t.Fatalf("weight %d: %v summed, %v from stored payloads", i, wa[i], wp[i])
		}
		if math.Float32bits(wa[i]) != math.Float32bits(wb[i]) {
			t.Fatalf("weight %d: %v and %v", i, wa[i], wb[i])
		}
	}
	for _, k := range []string{"updates", "clipped", "update_norm_median", "update_norm_max", "weight_total", "staleness_mean"} {
		if _, ok := rp.Stats[k]; !ok {
			t.Fatalf("stat %s missing from the payload round's %v", k, rp.Stats)
		}
		// (norms: esu.Check's from the int8 values, or of the
		// decoded float32 values)
		if !(math.Abs(ra.Stats[k]-rp.Stats[k]) <= 1e-6*max(1, math.Abs(rp.Stats[k]))) || ra.Stats[k] != rb.Stats[k] {
			t.Errorf("stat %s: summed %v (shuffled %v), stored payloads %v", k, ra.Stats[k], rb.Stats[k], rp.Stats[k])
		}
	}
	if ra.Stats["clipped"] != 1 || ra.Stats["weight_total"] != float64(6*10+37*15) {
		t.Errorf("stats %v: want 1 clipped, weight total %d", ra.Stats, 6*10+37*15)
	}
}

// TestSummingRoundRefusals: a summing round refuses a second update of a
// site (replay) from its stored record, and an update whose chunk scale
// exceeds the sums' bound as too_large without changing the sums.
func TestSummingRoundRefusals(t *testing.T) {
	ctx := context.Background()
	s := newSumRig(t, false)
	r, err := s.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.updates(r)
	s.judgeGroup(msgs[0])
	// site 0 again, with a new sequence: the site already contributed
	m, _ := s.c.FloatModel(r.BaseVersion)
	again := func(seq uint64, edit func([]byte)) []byte {
		payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: make([]float32, m.Net.NumParams())}, esu.DefaultOptions(seq))
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(payload)
		}
		b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{V: federated.ProtocolVersion, Site: "site-1", Seq: seq, Round: r.Round,
			BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: 5, Created: s.clock.Now()}, payload, s.keys[1])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var before []byte
	_ = s.c.view(func(tx *bolt.Tx) error {
		before = append([]byte(nil), tx.Bucket(store.BucketSums).Get(u64(r.Round))...)
		return nil
	})
	// all values 0 (norm 0) under a chunk scale of 1e30: refused
	huge := again(7, func(p []byte) {
		putF32(p[44:], 1e30)
		fixUpdateCRC(p)
	})
	if ack, err := s.c.Process(ctx, huge); err != nil || ack.Status != federated.Rejected || ack.Reason != federated.ReasonTooLarge {
		t.Fatalf("a chunk scale of 1e30: %+v %v, want rejected too_large", ack, err)
	}
	var after []byte
	_ = s.c.view(func(tx *bolt.Tx) error {
		after = append([]byte(nil), tx.Bucket(store.BucketSums).Get(u64(r.Round))...)
		return nil
	})
	if string(before) != string(after) {
		t.Fatal("a refused update changed the sums")
	}
	s.judgeGroup(msgs[1])
	if ack, err := s.c.Process(ctx, again(9, nil)); err != nil || ack.Status != federated.Rejected || ack.Reason != federated.ReasonReplay {
		t.Fatalf("site-1's second update of the round: %+v %v, want rejected %s", ack, err, federated.ReasonReplay)
	}
	if rr, _ := s.c.RoundRecord(r.Round); rr.Accepted != 2 {
		t.Fatalf("round accepted %d, want 2", rr.Accepted)
	}
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// fixUpdateCRC recomputes a quant update's trailing CRC-32 (IEEE, little
// endian) after an edit.
func fixUpdateCRC(p []byte) {
	n := len(p) - 4
	c := crc32.ChecksumIEEE(p[:n])
	p[n], p[n+1], p[n+2], p[n+3] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
}

// TestSumsDamaged: a changed byte in a summing round's sums, or a stored
// update missing from its count, stops the coordinator at open with the
// one damaged-store error naming the sums.
func TestSumsDamaged(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		edit  func(tx *bolt.Tx) error
		wants string
	}{
		{"flipped byte", func(tx *bolt.Tx) error {
			b := tx.Bucket(store.BucketSums)
			v := append([]byte(nil), b.Get(u64(1))...)
			v[len(v)/2] ^= 1
			return b.Put(u64(1), v)
		}, "checksum"},
		{"update missing", func(tx *bolt.Tx) error {
			return tx.Bucket(store.BucketUpdates).Bucket(u64(1)).Delete([]byte("site-0"))
		}, "count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSumRig(t, false)
			r, err := s.c.StartRound(ctx)
			if err != nil {
				t.Fatal(err)
			}
			msgs := s.updates(r)
			s.judgeGroup(msgs[0], msgs[1])
			s.c.Close()
			db, err := bolt.Open(s.c.path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(tc.edit); err != nil {
				t.Fatal(err)
			}
			db.Close()
			_, err = New(s.cfg)
			var de *DamagedError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.wants) || !strings.Contains(err.Error(), "sums") {
				t.Fatalf("open: %v, want a damaged store error about the sums (%s)", err, tc.wants)
			}
			s.c = nil
		})
	}
}
