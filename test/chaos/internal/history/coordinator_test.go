package history

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// TestReadCoordinator records verdicts with the real coordinator (its
// store and round logic, no bus) and reads them back: it pins the audit
// details the checker parses, so a change of their wording fails here
// and not silently in a chaos run.
func TestReadCoordinator(t *testing.T) {
	ctx := context.Background()
	rng := rand.NewChaCha8([32]byte{3})
	key := func() *quant.Signer {
		s, _, err := quant.GenerateKey(rng)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sites := map[string]*quant.Signer{"site-a": key(), "site-b": key()}
	reg := &federated.Registry{}
	for s, k := range sites {
		if err := reg.Add(s, k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := coordinator.DefaultConfig()
	cfg.DataDir, cfg.Sites, cfg.Signer, cfg.RoundDuration = dir, reg, key(), time.Hour
	cfg.Calibrate = fltest.NormalRows(100, 1)
	c, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := fltest.SmallModel(t, 3)
	net := start.Net
	if err := c.Bootstrap(ctx, start); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update := func(site string, seq uint64, signer *quant.Signer) []byte {
		delta := make([]float32, net.NumParams())
		payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Encoding: esu.Int8, Values: delta}, esu.DefaultOptions(seq))
		if err != nil {
			t.Fatal(err)
		}
		b, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
			BaseVersion: r.BaseVersion, Samples: 10, Created: time.Now()}, payload, signer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, m := range [][]byte{
		update("site-a", 1, sites["site-a"]), // accepted
		update("site-a", 2, sites["site-a"]), // a second update for the sync round: refused (replay), audited
		update("site-a", 2, sites["site-a"]), // the same again: the recorded verdict, no new audit entry
		update("site-b", 7, sites["site-a"]), // signed with another site's key: unattributed
		[]byte("junk"),                       // malformed: unattributed
	} {
		if _, err := c.Process(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := ReadCoordinator(filepath.Join(dir, "coordinator.db"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{
		{Site: "site-a", Seq: 1, Round: r.Round, Accepted: true},
		{Site: "site-a", Seq: 2, Round: r.Round, Reason: federated.ReasonReplay},
	}
	if len(v.Verdicts) != len(want) {
		t.Fatalf("verdicts %+v, want %+v", v.Verdicts, want)
	}
	for i, w := range want {
		got := v.Verdicts[i]
		if got.Time.IsZero() {
			t.Errorf("verdict %d has no time", i)
		}
		got.Time = time.Time{}
		if got != w {
			t.Errorf("verdict %d: %+v, want %+v", i, got, w)
		}
	}
	if v.Unattributed[federated.ReasonSignature] != 1 || v.Unattributed[federated.ReasonMalformed] != 1 || len(v.Unattributed) != 2 {
		t.Errorf("unattributed %v, want one bad_signature and one malformed", v.Unattributed)
	}
	// bootstrap model; the round still collecting
	if len(v.Models) != 1 || len(v.Rounds) != 1 || v.Rounds[0].State != coordinator.StateCollecting || len(v.Sites) != 1 {
		t.Errorf("models %d, rounds %+v, sites %d: want 1, one collecting, 1", len(v.Models), v.Rounds, len(v.Sites))
	}
	if v.Sites[0].Rejected[federated.ReasonReplay] != 1 || v.Rejects[federated.ReasonMalformed] != 1 {
		t.Errorf("site record %+v, rejects %v", v.Sites[0], v.Rejects)
	}
}

func TestReadCoordinatorRefusesOtherFiles(t *testing.T) {
	if _, err := ReadCoordinator(filepath.Join(t.TempDir(), "missing.db")); err == nil {
		t.Fatal("read a coordinator.db that does not exist")
	}
}
