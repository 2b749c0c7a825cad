package region

import (
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant/esu"
)

// TestSealAfterFailedSeal: a round that every site of the region has
// contributed to is sealed when the update that completed it is judged
// again, after the seal that followed its commit failed (the error naks
// the group and the stream delivers it again) or never ran (the
// aggregator stopped between the two transactions, before the ack).
// Before, only a new contribution (there is none left) or Lead before the
// root's deadline sealed it: the root waited up to the whole round for a
// region that had everything.
func TestSealAfterFailedSeal(t *testing.T) {
	const dims = 16
	reg, keys := testSites(t, "s1", "s2")
	round, base := summingRound(t)
	msg := func(site string) []byte {
		v := make([]float32, dims)
		for j := range v {
			v[j] = 0.01 * float32(j%5)
		}
		payload, err := esu.Encode(&esu.Update{Base: base, Values: v}, esu.DefaultOptions(1))
		if err != nil {
			t.Fatal(err)
		}
		b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: 1, Round: 2, BaseModel: base, BaseVersion: 1,
			Samples: 10, Created: time.Unix(0, 0).UTC()}, payload, keys[site])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, restart := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.Region, cfg.DataDir, cfg.Sites, cfg.Signer = "eu", t.TempDir(), reg, key(t, 9)
		g, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Open(&coordinator.RegionalRound{Round: round, Dims: dims}); err != nil {
			t.Fatal(err)
		}
		if ack, err := g.Process("", msg("s1")); err != nil || ack.Status != federated.Accepted {
			t.Fatalf("s1: %+v %v", ack, err)
		}
		// the seal after the last site's commit fails
		g.cfg.Signer = nil
		if _, err := g.Process("", msg("s2")); err == nil {
			t.Fatal("s2 judged and the seal without a key did not fail")
		}
		g.cfg.Signer = cfg.Signer
		if _, sealed, counted := g.Current(); sealed || counted != 2 {
			t.Fatalf("after the failed seal: sealed %v, %d counted; want unsealed, 2", sealed, counted)
		}
		if restart {
			g.Close()
			if g, err = New(cfg); err != nil {
				t.Fatal(err)
			}
		}
		// the stream delivers s2's update again
		if ack, err := g.Process("", msg("s2")); err != nil || ack.Status != federated.Accepted {
			t.Fatalf("s2 again (restart %v): %+v %v", restart, ack, err)
		}
		out, _ := g.Outbox()
		if _, sealed, counted := g.Current(); !sealed || counted != 2 || len(out) != 1 {
			t.Errorf("restart %v: s2's update judged again: sealed %v, %d counted, outbox %v; want sealed with its aggregate in the outbox", restart, sealed, counted, out)
		}
		g.Close()
	}
}
