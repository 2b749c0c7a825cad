package coordinator

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	bolt "go.etcd.io/bbolt"

	"github.com/edgesched/edgesched/coordinator/regional"
	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/boltkv"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// poisoned is site's signed update of round r with every value v.
func (u *unit) poisoned(t *testing.T, site string, seq uint64, r *Round, v float32, samples int64) []byte {
	t.Helper()
	m, err := u.c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	delta := make([]float32, m.Net.NumParams())
	for i := range delta {
		delta[i] = v
	}
	payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: delta}, esu.DefaultOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: samples, Created: u.clock.Now()}, payload, u.sites[site])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIngestBounds: an update whose L2 norm is above the round's bound is
// refused as too_large, one claiming more samples than the cap as
// too_heavy; both bounds are recorded in the round when it opens.
func TestIngestBounds(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 2)
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxNorm != DefaultMaxUpdateNorm || r.MaxSamples != DefaultMaxSamples || r.ClipNorm != DefaultClipNorm {
		t.Fatalf("round bounds %v %v %v, want the defaults", r.MaxNorm, r.MaxSamples, r.ClipNorm)
	}
	for _, tc := range []struct {
		name   string
		msg    []byte
		reason string
		detail string
	}{
		{"norm above the bound", u.poisoned(t, "site-a", 1, r, 1e30, 10), federated.ReasonTooLarge, "exceeds the round's bound"},
		{"samples above the cap", u.poisoned(t, "site-b", 1, r, 0.01, DefaultMaxSamples+1), federated.ReasonTooHeavy, ""},
	} {
		ack, err := u.c.Process(ctx, tc.msg)
		if err != nil || ack == nil || ack.Status != federated.Rejected || ack.Reason != tc.reason {
			t.Fatalf("%s: %+v %v, want rejected %s", tc.name, ack, err, tc.reason)
		}
	}
	if ack, err := u.c.Process(ctx, u.update(t, "site-a", 2, r)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("an honest update after: %+v %v", ack, err)
	}
}

// TestAggregationFailureFailsRound: with the ingest bound and clipping off
// a 3e38 update reaches aggregation, and the aggregate cannot make a
// usable int8 model. The round fails at once — state failed, a reason,
// round_failures_total counted — instead of staying aggregating and
// being retried; a new round opens; and a coordinator restarted on a
// store left in aggregating (a crash right after the round closed) fails
// that round on its first tick rather than looping on it.
func TestAggregationFailureFailsRound(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 2)
	cfg := u.c.cfg
	u.c.Close()
	cfg.MaxUpdateNorm, cfg.ClipNorm = 0, 0
	crashed := errors.New("killed after the round closed")
	cfg.Failpoint = func(name string) {
		if name == FailRoundClosed {
			panic(crashed)
		}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u.c = c
	r, err := c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := c.Process(ctx, u.update(t, "site-a", 1, r)); err != nil || ack.Status != federated.Accepted {
		t.Fatalf("site-a's honest update: %+v %v", ack, err)
	}
	// site-b's poisoned update completes the round, which closes and
	// "crashes" before aggregating
	func() {
		defer func() {
			if p := recover(); p != crashed {
				panic(p)
			}
		}()
		_, _ = c.Process(ctx, u.poisoned(t, "site-b", 1, r, 3e38, 10))
		t.Fatal("the failpoint did not fire")
	}()
	c.Close()
	cfg.Failpoint = nil
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if rr, _ := c.RoundRecord(r.Round); rr.State != StateAggregating {
		t.Fatalf("round after the crash: %s, want aggregating", rr.State)
	}
	if err := c.Tick(ctx); err != nil {
		t.Fatalf("tick: %v (a failed aggregation must fail the round, not be returned to retry)", err)
	}
	rr, err := c.RoundRecord(r.Round)
	if err != nil || rr.State != StateFailed || rr.Reason == "" || !strings.Contains(rr.Note, "version 2") {
		t.Fatalf("round %+v %v, want failed with a reason", rr, err)
	}
	t.Logf("round %d failed: %s: %s", rr.Round, rr.Reason, rr.Note)
	if n := testutil.ToFloat64(c.metrics.RoundFailures.WithLabelValues(rr.Reason)); n != 1 {
		t.Fatalf("round_failures_total{reason=%q} = %v, want 1", rr.Reason, n)
	}
	if err := c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := c.StartRound(ctx)
	if err != nil || next.Round != r.Round+1 {
		t.Fatalf("next round: %+v %v", next, err)
	}
}

// TestInsaneAggregateFailsRound: under the default bounds (the updates'
// norm is 3.6, below the clip norm), two float32 updates that cancel the
// first layer's weights exactly and set its biases to 1 make a model
// that quantizes but cannot tell nodes apart (its first hidden layer is the same whatever the input, so every
// calibration row gets the same score). The coordinator refuses to store
// it: the round fails with reason sanity, and the base model stays the
// newest.
func TestInsaneAggregateFailsRound(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 2)
	c := u.c
	r, err := c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	// Flat's order is policy.Shapes': W1 (F x H1), then b1 (H1, zero
	// at the start)
	w := m.Net.Flat()
	delta := make([]float32, len(w))
	b1 := m.Net.F * m.Net.H1
	for i := range b1 {
		delta[i] = -w[i]
	}
	for i := b1; i < b1+m.Net.H1; i++ {
		delta[i] = 1
	}
	opt := esu.DefaultOptions(1)
	opt.Encoding = esu.Float32
	for _, site := range []string{"site-a", "site-b"} {
		payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Encoding: esu.Float32, Values: delta}, opt)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: 1, Round: r.Round, BaseModel: r.BaseModel,
			BaseVersion: r.BaseVersion, Samples: 10, Created: u.clock.Now()}, payload, u.sites[site])
		if err != nil {
			t.Fatal(err)
		}
		if ack, err := c.Process(ctx, msg); err != nil || ack.Status != federated.Accepted {
			t.Fatalf("%s's update: %+v %v", site, ack, err)
		}
	}
	if err := c.Tick(ctx); err != nil {
		t.Fatalf("tick: %v", err)
	}
	rr, err := c.RoundRecord(r.Round)
	if err != nil || rr.State != StateFailed || rr.Reason != FailReasonSanity {
		t.Fatalf("round %+v %v, want failed with reason %s", rr, err, FailReasonSanity)
	}
	t.Logf("round %d failed: %s: %s", rr.Round, rr.Reason, rr.Note)
	if n := testutil.ToFloat64(c.metrics.RoundFailures.WithLabelValues(FailReasonSanity)); n != 1 {
		t.Fatalf("round_failures_total{reason=%q} = %v, want 1", FailReasonSanity, n)
	}
	if newest, err := c.ModelRecord(0); err != nil || newest.Version != r.BaseVersion {
		t.Fatalf("newest model %+v %v, want the base version %d kept", newest, err, r.BaseVersion)
	}
}

// resealed is msg, a signed message whose header (JSON, after its u32
// length at off) is edited by replacing old with new, signed again by s:
// what a holder of the site's (or region's) key can send, whatever the
// encoder allows.
func resealed(t *testing.T, msg []byte, off int, s *quant.Signer, old, new string) []byte {
	t.Helper()
	hl := int(binary.LittleEndian.Uint32(msg[off:]))
	hdr := msg[off+4 : off+4+hl]
	edited := bytes.Replace(hdr, []byte(old), []byte(new), 1)
	if bytes.Equal(edited, hdr) {
		t.Fatalf("%q not in header %s", old, hdr)
	}
	body := append(bytes.Clone(msg[:off]), binary.LittleEndian.AppendUint32(nil, uint32(len(edited)))...)
	body = append(body, edited...)
	body = append(body, msg[off+4+hl:len(msg)-ed25519.SignatureSize]...)
	return append(body, s.Sign(body)...)
}

// TestImplausibleSequence: an update (or a regional aggregate's entry)
// signed with a site's sequence above federated.MaxSeq, up to 2^64-1 (a
// buggy or hostile sender with the key), is refused as malformed (counted,
// in the metrics, audited, no ack) and does not touch the site's record: before, it was
// judged, took the site's high-water mark to the top of uint64, and every
// later update of the site was refused as a replay. A valid sequence more
// than federated.MaxSeqJump (2^32) above the mark (0 here), MaxSeq itself
// among them, is refused as seq_jump and leaves the mark too (it used to
// be taken in one message); 2^32 itself is taken. A regional entry is the
// region's to judge (its own marks move with refused updates too, so the
// root's may lag them): the root takes one 2^32+1 ahead.
func TestImplausibleSequence(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		seq      string // the header's sequence, as sent
		regional bool   // in a regional aggregate, not a direct update
		relayed  bool   // a direct update of site-a, a site of region eu (a region relays them)
		reason   string // "": accepted
	}{
		{"update at 2^64-1", "18446744073709551615", false, false, federated.ReasonMalformed},
		{"update at MaxSeq+1", "9223372036854775808", false, false, federated.ReasonMalformed},
		{"update at MaxSeq", "9223372036854775807", false, false, federated.ReasonSeqJump},
		{"update at 2^32+1", "4294967297", false, false, federated.ReasonSeqJump},
		{"update at 2^32", "4294967296", false, false, ""},
		// the region judged it against its own marks, which the root's lag
		{"relayed update of a regional site at 2^32+1", "4294967297", false, true, ""},
		{"regional entry at 2^64-1", "18446744073709551615", true, false, federated.ReasonMalformed},
		{"regional entry at MaxSeq+1", "9223372036854775808", true, false, federated.ReasonMalformed},
		{"regional entry at 2^32+1", "4294967297", true, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// site-a sends through region eu, site-b directly
			site := "site-b"
			if tc.regional || tc.relayed {
				site = "site-a"
			}
			rk := testKey(t, 50)
			u := newUnitOf(t, nil, fiveSites, func(c *Config) {
				c.MinUpdates = 2 // the round stays open after one update
				c.Regions = &federated.Regions{}
				if err := c.Regions.Add("eu", rk.Public(), "site-a"); err != nil {
					t.Fatal(err)
				}
			})
			r, err := u.c.StartRound(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hwm := func() uint64 {
				t.Helper()
				sites, err := u.c.Sites()
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range sites {
					if s.Site.Site == site {
						return s.Site.HWM
					}
				}
				return 0
			}
			if tc.regional {
				raw := u.regionalAggregate(t, rk, r, "site-a")
				v, err := u.c.ProcessRegional(ctx, "", resealed(t, raw, 5, rk, `"seq":1,`, `"seq":`+tc.seq+`,`))
				if tc.reason == "" {
					if err != nil || v.Status != federated.Accepted || fmt.Sprint(hwm()) != tc.seq {
						t.Fatalf("aggregate: %+v %v, high-water mark %d; want accepted at %s", v, err, hwm(), tc.seq)
					}
					return
				}
				if err != nil || v.Status != federated.Rejected || v.Reason != tc.reason {
					t.Fatalf("aggregate: %+v %v, want rejected %s", v, err, tc.reason)
				}
			} else {
				raw := resealed(t, u.update(t, site, 1, r), 6+len(u.sites[site].ID), u.sites[site], `"seq":1,`, `"seq":`+tc.seq+`,`)
				ack, err := u.c.Process(ctx, raw)
				if err != nil {
					t.Fatal(err)
				}
				if tc.reason == "" {
					if ack == nil || ack.Status != federated.Accepted || fmt.Sprint(hwm()) != tc.seq {
						t.Fatalf("update at %s: %+v, high-water mark %d; want accepted at %s", tc.seq, ack, hwm(), tc.seq)
					}
					return
				}
				rej, err := u.c.Rejects()
				if err != nil {
					t.Fatal(err)
				}
				metric := testutil.ToFloat64(u.c.metrics.Updates.WithLabelValues(string(federated.Rejected), tc.reason))
				wantAck := tc.reason != federated.ReasonMalformed // a malformed message is nobody's to ack
				if (ack != nil) != wantAck || (ack != nil && (ack.Status != federated.Rejected || ack.Reason != tc.reason)) || rej[tc.reason] != 1 || metric != 1 {
					t.Fatalf("update at %s: ack %+v, %d %s counted (metric %v); want %s counted once", tc.seq, ack, rej[tc.reason], tc.reason, metric, tc.reason)
				}
			}
			if got := hwm(); got != 0 {
				t.Fatalf("%s's high-water mark %d after the refusal, want 0", site, got)
			}
			// and keeps no verdict (one above the mark would never be pruned)
			verdicts := 0
			if err := u.c.view(func(tx *bolt.Tx) error {
				c := tx.Bucket(store.BucketJudged).Cursor()
				for k, _ := c.Seek([]byte(site + "\x00")); k != nil && bytes.HasPrefix(k, []byte(site+"\x00")); k, _ = c.Next() {
					verdicts++
				}
				return nil
			}); err != nil || verdicts != 0 {
				t.Fatalf("%d verdicts kept for %s after the refusal (%v), want none", verdicts, site, err)
			}
			// the site's next honest update is judged, not a replay
			if ack, err := u.c.Process(ctx, u.update(t, site, 1, r)); err != nil || ack == nil || ack.Status != federated.Accepted {
				t.Fatalf("%s's update 1 after the refusal: %+v %v, want accepted", site, ack, err)
			}
		})
	}
}

// TestSeqJumpCountedOnce: a seq_jump refusal keeps no verdict under its
// sequence, so the stream's redelivery of the same message (same stream
// sequence: the coordinator stopped between its commit and its ack) is
// known by the stream sequence and answered again without being counted
// again (it was counted on every delivery), also after the site's mark
// moved so near that it would no longer be a jump (it would be judged
// afresh); the same update under another stream sequence (sent again
// after the de-duplication window) counts.
func TestSeqJumpCountedOnce(t *testing.T) {
	ctx := context.Background()
	u := newUnitOf(t, nil, fiveSites, func(c *Config) { c.MinUpdates = 2 })
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u.accept(t, "site-a", 1, r)
	jump := resealed(t, u.update(t, "site-a", 1, r), 6+len(u.sites["site-a"].ID), u.sites["site-a"], `"seq":1,`, `"seq":4294967298,`) // 1 + 2^32 + 1
	counted := func() (site, store int) {
		t.Helper()
		rej, err := u.c.Rejects()
		if err != nil {
			t.Fatal(err)
		}
		ss, err := u.c.Sites()
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range ss {
			if st.Site.Site == "site-a" {
				site = st.Rejected[federated.ReasonSeqJump]
			}
		}
		return site, int(rej[federated.ReasonSeqJump])
	}
	for i, tc := range []struct {
		stream     uint64
		moveMark   bool // first, site-a's update 2 (refused: the site contributed) moves its mark to 2
		site, kept int
	}{{42, false, 1, 1}, {42, false, 1, 1}, {43, false, 2, 2}, {42, true, 2, 2}} {
		if tc.moveMark {
			if _, err := u.c.Process(ctx, u.update(t, "site-a", 2, r)); err != nil {
				t.Fatal(err)
			}
		}
		ack, err := u.c.processFrom(ctx, "", jump, tc.stream)
		if err != nil || ack == nil || ack.Status != federated.Rejected || ack.Reason != federated.ReasonSeqJump {
			t.Fatalf("delivery %d (stream %d): %+v %v, want rejected %s", i+1, tc.stream, ack, err, federated.ReasonSeqJump)
		}
		if site, kept := counted(); site != tc.site || kept != tc.kept {
			t.Fatalf("after delivery %d (stream %d): %d counted in the site record, %d in the store; want %d and %d", i+1, tc.stream, site, kept, tc.site, tc.kept)
		}
	}
}

// regionalAggregate is region eu's aggregate of round r (signed with rk):
// site's update 1, 10 samples, every parameter 0.1.
func (u *unit) regionalAggregate(t *testing.T, rk *quant.Signer, r *Round, site string) []byte {
	t.Helper()
	m, err := u.c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	a := &federated.RegionalAggregate{Header: federated.RegionalHeader{V: federated.ProtocolVersion, Region: "eu", Round: r.Round, Shift: r.Sum.Shift,
		Sites: []federated.RegionalSite{{Site: site, Seq: 1, Samples: 10, BaseVersion: r.BaseVersion, Norm: 0.01 * math.Sqrt(float64(m.NumParams()))}}}}
	a.Hi, a.Lo = make([]int64, m.NumParams()), make([]uint64, m.NumParams())
	for i := range a.Hi {
		a.Hi[i], a.Lo[i] = fixed128(0.1, r.Sum.Shift)
	}
	raw, err := federated.EncodeRegional(a, rk)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestRegionalVerdictsPruned: the verdicts of regional aggregates (a
// refused one here: it lists a site of another region) are dropped with
// the round's stored updates, KeepUpdates rounds on; they were kept for
// ever, one per distinct refused aggregate a region's key holder sent.
// One of a round not yet open is not kept at all.
func TestRegionalVerdictsPruned(t *testing.T) {
	ctx := context.Background()
	rk := testKey(t, 51)
	u := newUnitOf(t, nil, fiveSites, func(c *Config) {
		c.MinUpdates, c.KeepUpdates = 2, 1
		c.Regions = &federated.Regions{}
		if err := c.Regions.Add("eu", rk.Public(), "site-a"); err != nil {
			t.Fatal(err)
		}
	})
	verdicts := func(round uint64) (n int) {
		t.Helper()
		if err := u.c.view(func(tx *bolt.Tx) error {
			b := tx.Bucket(regional.Bucket)
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, _ []byte) error {
				if boltkv.FromU64(k[:8]) == round {
					n++
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	r1, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := u.c.ProcessRegional(ctx, "", u.regionalAggregate(t, rk, r1, "site-b")); err != nil || v.Status != federated.Rejected {
		t.Fatalf("an aggregate listing another region's site: %+v %v, want rejected", v, err)
	}
	// one of a round far ahead (any round number verifies) is refused and
	// keeps no verdict: no round's close would prune it
	far := *r1
	far.Round = 1 << 40
	for range 2 {
		if v, err := u.c.ProcessRegional(ctx, "", u.regionalAggregate(t, rk, &far, "site-a")); err != nil || v.Status != federated.Rejected || v.Reason != regional.ReasonRoundNotOpen {
			t.Fatalf("an aggregate of round %d: %+v %v, want rejected (%s)", far.Round, v, err, regional.ReasonRoundNotOpen)
		}
	}
	if got := verdicts(far.Round); got != 0 {
		t.Fatalf("%d verdicts kept of round %d, want none", got, far.Round)
	}
	for i, step := range []struct {
		close uint64
		want  int // round 1's verdicts left
	}{{r1.Round, 1}, {r1.Round + 1, 0}} { // KeepUpdates 1: round 2's close prunes round 1
		if step.close != r1.Round {
			if _, err := u.c.StartRound(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := u.c.CloseRound(ctx, step.close); err != nil {
			t.Fatal(err)
		}
		if got := verdicts(r1.Round); got != step.want {
			t.Fatalf("step %d: round %d closed, %d verdicts of round 1 left, want %d", i, step.close, got, step.want)
		}
	}
}
