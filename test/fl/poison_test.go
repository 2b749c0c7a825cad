package fl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant/esu"
)

// hugeTrainer is a compromised site: it sends every weight moved by
// Value (huge but finite, so the update is well formed and signed), and
// claims Samples samples.
type hugeTrainer struct {
	value   float32
	samples int64
}

func (h *hugeTrainer) Train(_ context.Context, base *nn.Model, _ federated.LocalTraining, _ uint64) (*nn.Model, int64, error) {
	w := base.Net.Flat()
	delta := make([]float32, len(w))
	for i := range delta {
		delta[i] = h.value
	}
	out := &nn.Model{Schema: base.Schema, Net: base.Net.Clone(), Meta: base.Meta, Decision: base.Decision}
	if err := out.Net.AddFlat(delta, 1); err != nil {
		return nil, 0, err
	}
	return out, h.samples, nil
}

// publishUpdate signs site's update of values (int8) against round r and
// publishes it onto the update stream as an agent does.
func (f *fleet) publishUpdate(t *testing.T, js jetstream.JetStream, site string, seq uint64, r *coordinator.Round, values []float32, samples int64) {
	t.Helper()
	payload, err := esu.Encode(&esu.Update{Base: r.BaseModel, Values: values}, esu.DefaultOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: site, Seq: seq, Round: r.Round, BaseModel: r.BaseModel,
		BaseVersion: r.BaseVersion, Samples: samples, Created: time.Now().UTC()}, payload, f.keys[site])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), federated.UpdateSubjectPrefix+site, msg, jetstream.WithMsgID(federated.MsgID(site, seq))); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonUpdateCannotStopFederation reproduces finding 1 of issue 21:
// with the default configuration (FedAvg), one signed update from a
// registered site with huge but finite values — 3e38, or 1e30 claiming 1
// sample against an honest 1,000,000 — left the round aggregating for
// ever (the aggregate could not be quantized, and that was retried every
// poll), 'round start' answered 409, and a restarted coordinator looped
// in its recovery without serving its admin API. Now the round ends
// (published from the honest update: the poisoned one is refused), a new
// round starts, and a coordinator restarted on the same store serves its
// admin API and opens the next round.
func TestPoisonUpdateCannotStopFederation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   float32
		samples int64
	}{
		{"3e38", 3e38, 100},
		{"1e30 claiming 1 sample against 1,000,000", 1e30, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fltest.StartNATS(t)
			f := newFleet(t, srv.ClientURL(), 2)
			dir := t.TempDir()
			cfg := f.coordinatorConfig(dir) // the defaults: FedAvg, the default clipping and bounds
			start := fltest.SmallModel(t, 1)
			c, stop := f.runCoordinator(cfg, start)
			ctx := context.Background()
			r, err := c.StartRound(ctx)
			if err != nil {
				t.Fatal(err)
			}
			js, err := jetstream.New(fltest.Connect(t, srv.ClientURL(), "sites"))
			if err != nil {
				t.Fatal(err)
			}
			dims := start.Net.NumParams()
			honest, poison := make([]float32, dims), make([]float32, dims)
			for i := range honest {
				honest[i], poison[i] = 0.01*float32(i%7-3), tc.value
			}
			f.publishUpdate(t, js, f.sites[0], 1, r, honest, 1_000_000)
			f.publishUpdate(t, js, f.sites[1], 1, r, poison, tc.samples)
			fltest.Eventually(t, 30*time.Second, "both updates judged", func() (bool, string) {
				rr, err := c.RoundRecord(r.Round)
				if err != nil {
					return false, err.Error()
				}
				rej, _ := c.Rejects()
				var n uint64
				for _, v := range rej {
					n += v
				}
				return uint64(rr.Accepted)+n >= 2 || rr.State != coordinator.StateCollecting, fmt.Sprintf("%+v, rejected %v", rr, rej)
			})
			if rr, _ := c.RoundRecord(r.Round); rr.State == coordinator.StateCollecting {
				if err := c.CloseRound(ctx, r.Round); err != nil {
					t.Fatalf("close the round: %v", err)
				}
			}
			fltest.Eventually(t, 30*time.Second, "the round to end (not stay aggregating)", func() (bool, string) {
				rr, err := c.RoundRecord(r.Round)
				return err == nil && (rr.State == coordinator.StatePublished || rr.State == coordinator.StateFailed), fmt.Sprintf("%+v %v", rr, err)
			})
			rr, _ := c.RoundRecord(r.Round)
			rej, _ := c.Rejects()
			t.Logf("round %d: %s (accepted %d, note %q), refusals %v", rr.Round, rr.State, rr.Accepted, rr.Note, rej)
			if rr.State != coordinator.StatePublished || rr.Accepted != 1 || rej["too_large"] != 1 {
				t.Fatalf("round %+v, refusals %v: want it published from the honest update, the poisoned one refused as too_large", rr, rej)
			}
			next, err := c.StartRound(ctx)
			if err != nil {
				t.Fatalf("round start after the poisoned round: %v", err)
			}
			// restart on the same store: the admin API answers and opens a
			// round (the one under way is closed first)
			if err := c.CloseRound(ctx, next.Round); err != nil {
				t.Fatal(err)
			}
			stop()
			c2, _ := f.runCoordinator(cfg, start)
			nc := fltest.Connect(t, srv.ClientURL(), "operator")
			fltest.Eventually(t, 20*time.Second, "the restarted coordinator's admin API to open a round", func() (bool, string) {
				m, err := nc.Request(federated.AdminSubjectPrefix+"."+coordinator.EndpointRoundStart, []byte("{}"), 500*time.Millisecond)
				if err != nil {
					return false, err.Error()
				}
				if m.Header.Get("Nats-Service-Error-Code") != "" {
					return false, m.Header.Get("Nats-Service-Error")
				}
				return true, ""
			})
			cur, err := c2.RoundRecord(next.Round + 1)
			if err != nil || cur.State != coordinator.StateCollecting {
				t.Fatalf("round %d after the restart: %+v %v", next.Round+1, cur, err)
			}
		})
	}
}
