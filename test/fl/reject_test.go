package fl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// TestBadUpdatesChangeNothing: malformed, non-finite, wrongly shaped,
// stale, future, replayed, unsigned-by-the-site and unregistered updates
// reach a real coordinator over JetStream between two honest ones; each is
// rejected and counted under its reason, and the round's model is
// bit-identical to the one a clean run makes from the honest updates alone.
func TestBadUpdatesChangeNothing(t *testing.T) {
	run := func(attack bool) (string, map[string]uint64) {
		srv := fltest.StartNATS(t)
		f := newFleet(t, srv.ClientURL(), 3)
		cfg := f.coordinatorConfig(t.TempDir())
		cfg.MinUpdates = 2
		cfg.RoundDuration = time.Hour
		start := fltest.SmallModel(t, 1)
		c, _ := f.runCoordinator(cfg, start)
		r, err := c.StartRound(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// the round expects 3 sites: site-02 never comes, so it closes at
		// the deadline, which the test brings forward by a Tick after the
		// honest updates
		if attack {
			f.attack(t, srv.ClientURL(), r, start.Net.NumParams())
		}
		for _, s := range f.sites[:2] {
			f.startAgent(s, filepath.Join(t.TempDir(), s), f.synthetic(0.001), nil)
		}
		fltest.Eventually(t, 30*time.Second, "the honest updates", func() (bool, string) {
			rr, _ := c.RoundRecord(r.Round)
			return rr.Accepted == 2, fmt.Sprintf("%+v", rr)
		})
		if attack {
			fltest.Eventually(t, 10*time.Second, "every bad update to be judged", func() (bool, string) {
				rej, _ := c.Rejects()
				var n uint64
				for _, v := range rej {
					n += v
				}
				return n >= uint64(len(attackReasons)), fmt.Sprintf("%v", rej)
			})
		}
		closeNow(t, c, r.Round)
		rr, _ := c.RoundRecord(r.Round)
		if rr.State != coordinator.StatePublished || rr.Accepted != 2 {
			t.Fatalf("round: %+v", rr)
		}
		m, _ := c.ModelRecord(rr.Result)
		rej, _ := c.Rejects()
		return m.FloatModel, rej
	}
	clean, _ := run(false)
	attacked, rej := run(true)
	if clean != attacked {
		t.Fatalf("bad updates changed the model: %s vs %s", attacked, clean)
	}
	for _, reason := range attackReasons {
		if rej[reason] == 0 {
			t.Errorf("no rejection counted for %s: %v", reason, rej)
		}
	}
	t.Logf("rejections by reason: %v", rej)
}

var attackReasons = []string{federated.ReasonMalformed, federated.ReasonNonFinite, federated.ReasonShape, federated.ReasonStaleRound,
	federated.ReasonFutureRound, federated.ReasonReplay, federated.ReasonSignature, federated.ReasonUnknownSite, federated.ReasonBaseModel}

// closeNow ends a sync round at once (unless every expected site already
// closed it) and waits for its model.
func closeNow(t *testing.T, c *coordinator.Coordinator, round uint64) {
	t.Helper()
	if rr, _ := c.RoundRecord(round); rr != nil && rr.State == coordinator.StateCollecting {
		// (a round that closed itself meanwhile, and was followed by
		// the next, is no longer current: nothing to close)
		if err := c.CloseRound(context.Background(), round); err != nil && !errors.Is(err, coordinator.ErrNotFound) {
			t.Fatal(err)
		}
	}
	fltest.Eventually(t, 30*time.Second, "the round's model", func() (bool, string) {
		rr, _ := c.RoundRecord(round)
		return rr.State == coordinator.StatePublished, rr.State
	})
}

// attack publishes one bad update per reason straight onto the stream.
func (f *fleet) attack(t *testing.T, url string, r *coordinator.Round, dims int) {
	t.Helper()
	nc := fltest.Connect(t, url, "attacker")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	site := f.sites[2]
	good := func(seq uint64, round uint64, values []float32) []byte {
		payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: values}, esu.DefaultOptions(seq))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: round, BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: 10}, payload, f.keys[site])
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	zeros := func(n int) []float32 { return make([]float32, n) }
	// a float32 payload carrying NaN, correctly checksummed
	nanPayload := func() []byte {
		b, _ := esu.Encode(&esu.Update{Base: r.BaseModel, Values: zeros(dims)}, esu.Options{Encoding: esu.Float32})
		binary.LittleEndian.PutUint32(b[44:], math.Float32bits(float32(math.NaN())))
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
		return b
	}()
	nan, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: 3, Round: r.Round, BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: 10}, nanPayload, f.keys[site])
	if err != nil {
		t.Fatal(err)
	}
	replayed := good(1, r.Round+5, zeros(dims)) // future round, seq 1; replayed below under another MsgID
	tampered := good(8, r.Round, zeros(dims))
	tampered[len(tampered)-100] ^= 1
	stranger, _, _ := quant.GenerateKey(nil)
	forged, _ := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: 9, Round: r.Round, BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: 10},
		mustPayload(t, r.BaseModel, dims), stranger)
	unknown, _ := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: "nobody", Seq: 1, Round: r.Round, BaseModel: r.BaseModel, BaseVersion: r.BaseVersion, Samples: 10},
		mustPayload(t, r.BaseModel, dims), stranger)
	wrongBase := func() []byte {
		other := fmt.Sprintf("%064x", 7)
		payload, _ := esu.Encode(&esu.Update{Base: other, Values: zeros(dims)}, esu.DefaultOptions(1))
		m, _ := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: 10, Round: r.Round, BaseModel: other, BaseVersion: r.BaseVersion, Samples: 10}, payload, f.keys[site])
		return m
	}()
	// Sequences: the junk and unattributable messages carry none; the
	// site's own bad updates use 1-4 and 8-11, so the replay of seq 1 is
	// at or below the high-water mark when it arrives. Round 0 is before
	// the first round: stale.
	msgs := []struct {
		id   string
		data []byte
	}{
		{"junk", []byte("not an update")},          // malformed
		{"future", replayed},                       // unknown_round (seq 1)
		{"short", good(2, r.Round, zeros(dims-1))}, // wrong_shape
		{"nan", nan}, // non_finite (seq 3)
		{"stale", good(4, r.Round-1, zeros(dims))}, // stale_round
		{"replay", replayed},                       // seq 1 again, new MsgID: replay
		{"tampered", tampered},                     // bad_signature
		{"forged", forged},                         // bad_signature (not the site's key)
		{"unknown", unknown},                       // unknown_site
		{"wrong-base", wrongBase},                  // wrong_base_model
		{"long", good(11, r.Round, zeros(dims+1))}, // wrong_shape
	}
	for _, m := range msgs {
		if _, err := js.Publish(context.Background(), federated.UpdateSubjectPrefix+site, m.data, jetstream.WithMsgID("attack-"+m.id)); err != nil {
			t.Fatal(err)
		}
	}
}

func mustPayload(t *testing.T, base string, dims int) []byte {
	t.Helper()
	p, err := esu.Encode(&esu.Update{Base: base, Values: make([]float32, dims)}, esu.DefaultOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
