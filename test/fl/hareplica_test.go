package fl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// replica is an in-process coordinator.RunReplica.
type replica struct {
	reg  *prometheus.Registry
	done chan struct{} // closed once RunReplica returned err
	err  error
	stop context.CancelFunc
}

func (f *fleet) startReplica(id string) *replica {
	t := f.t
	cfg := f.coordinatorConfig(t.TempDir())
	cfg.HA, cfg.ReplicaID, cfg.LeaseTTL, cfg.CheckpointEvery, cfg.AutoRounds = true, id, 2*time.Second, time.Hour, true
	r := &replica{reg: prometheus.NewRegistry(), done: make(chan struct{})}
	cfg.Registerer = r.reg
	nc := fltest.Connect(t, f.url, "coordinator-"+id)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() {
		defer close(r.done)
		r.err = coordinator.RunReplica(ctx, cfg, nc, fltest.SmallModel(t, 1))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Errorf("replica %s did not stop", id)
		}
	})
	return r
}

func (r *replica) gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			m := mf.Metric[0]
			if m.Gauge != nil {
				return m.Gauge.GetValue()
			}
			return m.Counter.GetValue()
		}
	}
	return -1
}

// TestHAReplicaHandover: two replicas in one process on one server. The
// first is active (edgesched_coordinator_active 1), the second a standby
// (0). A clean stop of the active releases its lease, so the standby
// takes over at once (well before the 2 s lease would expire), counting
// one takeover. Then an impostor claims the checkpoint pointer, as a
// newer active would: the next checkpoint of the current active is
// refused and it stops with ErrDeposed (fencing).
func TestHAReplicaHandover(t *testing.T) {
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 2)
	nc := fltest.Connect(t, srv.ClientURL(), "ha-probe")
	a := f.startReplica("a")
	fltest.Eventually(t, 20*time.Second, "replica a active", func() (bool, string) {
		var st coordinator.HAStatus
		err := adminCall(nc, coordinator.EndpointHAStatus, &st)
		return err == nil && st.Replica == "a" && a.gauge(t, "edgesched_coordinator_active") == 1, fmt.Sprintf("%+v %v", st, err)
	})
	b := f.startReplica("b")
	fltest.Eventually(t, 10*time.Second, "replica b standby", func() (bool, string) {
		v := b.gauge(t, "edgesched_coordinator_active")
		return v == 0, fmt.Sprint(v)
	})
	a.stop()
	stopped := time.Now()
	<-a.done
	if a.err != nil {
		t.Fatalf("replica a stopped with %v", a.err)
	}
	fltest.Eventually(t, 10*time.Second, "replica b active", func() (bool, string) {
		var st coordinator.HAStatus
		err := adminCall(nc, coordinator.EndpointHAStatus, &st)
		return err == nil && st.Replica == "b", fmt.Sprintf("%+v %v", st, err)
	})
	t.Logf("handover after a clean stop: %v", time.Since(stopped).Round(time.Millisecond))
	if n := b.gauge(t, "edgesched_coordinator_takeovers_total"); n != 1 {
		t.Errorf("takeovers_total %v, want 1", n)
	}

	// an impostor takes the checkpoint pointer
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, coordinator.HABucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	var ck coordinator.Checkpoint
	if err := json.Unmarshal(e.Value(), &ck); err != nil {
		t.Fatal(err)
	}
	ck.Epoch, ck.Replica = ck.Epoch+1000, "impostor"
	raw, _ := json.Marshal(ck)
	if _, err := kv.Update(ctx, "checkpoint", raw, e.Revision()); err != nil {
		t.Fatal(err)
	}
	// the next publication needs a checkpoint: the sites' updates complete
	// round 1
	for _, s := range f.sites {
		f.startAgent(s, t.TempDir(), f.synthetic(0), nil)
	}
	select {
	case <-b.done:
		if !errors.Is(b.err, coordinator.ErrDeposed) {
			t.Fatalf("replica b stopped with %v, want ErrDeposed", b.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("replica b still runs after losing the checkpoint pointer")
	}
}
