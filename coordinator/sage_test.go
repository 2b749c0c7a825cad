package coordinator

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant/esu"
)

// TestRoundTrainsGraphSAGE: a model that carries GraphSAGE weights takes
// them through a round like its network: the sites' updates cover both
// (nn.Model.Flat), the aggregate moves both, and the new model carries
// the moved weights under a new ID (what its partners are then
// published and read under). An update of the network's size alone is
// refused as of the wrong shape.
func TestRoundTrainsGraphSAGE(t *testing.T) {
	ctx := context.Background()
	net, err := nn.NewNet(policy.NumFeatures, 4, 4, 4, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	u := newUnitWith(t, 1, &nn.Model{Schema: policy.NewSchema(), Net: net, Sage: policy.DefaultSage()})
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base, err := u.c.FloatModel(r.BaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	if base.Sage == nil || base.Sage.ID() != policy.AffinityEncoder {
		t.Fatalf("the stored base model's GraphSAGE weights: %v", base.Sage)
	}
	send := func(seq uint64, delta []float32) *federated.Ack {
		payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Encoding: esu.Float32, Values: delta}, esu.Options{Encoding: esu.Float32})
		if err != nil {
			t.Fatal(err)
		}
		h := federated.UpdateHeader{V: federated.ProtocolVersion, Site: "site-a", Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
			BaseVersion: r.BaseVersion, Samples: 10, Created: u.clock.Now()}
		b, err := federated.EncodeUpdateMsg(h, payload, u.sites["site-a"])
		if err != nil {
			t.Fatal(err)
		}
		ack, err := u.c.Process(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if ack := send(1, make([]float32, base.Net.NumParams())); ack.Status != federated.Rejected || ack.Reason != federated.ReasonShape {
		t.Fatalf("an update without the GraphSAGE part: %+v, want rejected %s", ack, federated.ReasonShape)
	}
	k := base.Net.NumParams()
	delta := make([]float32, base.NumParams())
	for i := k; i < len(delta); i++ {
		delta[i] = 0.001 // the GraphSAGE part only
	}
	if ack := send(2, delta); ack.Status != federated.Accepted {
		t.Fatalf("the update: %+v", ack)
	}
	u.clock.Add(10 * time.Minute)
	if err := u.c.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := u.c.RoundRecord(r.Round)
	if err != nil || got.State != StatePublished {
		t.Fatalf("round: %+v %v", got, err)
	}
	next, err := u.c.FloatModel(got.Result)
	if err != nil {
		t.Fatal(err)
	}
	lr := float32(u.c.cfg.ServerLR)
	a, b := base.Flat(), next.Flat()
	for i := range a {
		if want := a[i] + lr*delta[i]; b[i] != want {
			t.Fatalf("value %d (GraphSAGE from %d): %v, want %v + %v * %v", i, k, b[i], a[i], lr, delta[i])
		}
	}
	if next.Sage == nil || next.Sage.ID() == base.Sage.ID() || next.AffinityEncoder() != next.Sage.ID() {
		t.Fatalf("the new model's GraphSAGE weights: %v (base %s)", next.Sage, base.Sage.ID())
	}
}
