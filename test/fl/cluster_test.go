package fl

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// TestClusterServerLossMidRound: the coordinator on a 3-server JetStream
// cluster with everything it creates replicated 3 times (--replicas 3).
// Round 1 opens, three of five sites' updates are in, and the server
// leading the update stream is shut down; the other two sites send after
// the loss. Every round still takes all five updates exactly once (three
// rounds, each with 5 accepted, every site's counters at 3 accepted and 3
// trained), the models advance 1 -> 4 and every site installs version 4
// from the replicated model store.
func TestClusterServerLossMidRound(t *testing.T) {
	cl := fltest.StartCluster(t, 3)
	f := newFleet(t, cl.URLs(), 5)
	cfg := f.coordinatorConfig(t.TempDir())
	cfg.AutoRounds, cfg.Rounds, cfg.MinUpdates, cfg.Replicas = true, 3, 5, 3
	c, _ := f.runCoordinator(cfg, fltest.SmallModel(t, 1))

	nc := fltest.Connect(t, cl.URLs(), "observer")
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, stream := range []string{federated.UpdateStream, "KV_" + federated.StateBucket, "OBJ_" + federated.ModelBucket} {
		fltest.Eventually(t, 30*time.Second, stream+" with 3 replicas", func() (bool, string) {
			s, err := js.Stream(ctx, stream)
			if err != nil {
				return false, err.Error()
			}
			info, err := s.Info(ctx)
			if err != nil || info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
				return false, fmt.Sprintf("%+v %v", info, err)
			}
			return true, ""
		})
	}

	var agents []*agent
	start := func(sites []string) {
		for _, s := range sites {
			agents = append(agents, f.startAgent(s, filepath.Join(t.TempDir(), s), f.synthetic(0.001), nil))
		}
	}
	start(f.sites[:3])
	fltest.Eventually(t, 60*time.Second, "three updates in round 1", func() (bool, string) {
		r, err := c.RoundRecord(1)
		return err == nil && r.Accepted == 3, fmt.Sprintf("%+v %v", r, err)
	})
	shutdownStreamLeader(t, cl, js, federated.UpdateStream) // round 1 at 3 of 5 updates
	start(f.sites[3:])

	fullRounds(t, c, 3, 5, 90*time.Second)
	allInstalled(t, agents, 4, 30*time.Second)
	for _, a := range agents {
		if st, _ := a.c.Status(); st.Counters.Accepted != 3 || st.Counters.Trained != 3 {
			t.Errorf("%s: counters %+v, want 3 accepted and 3 trained", st.Site, st.Counters)
		}
	}
	if leader, err := fltest.StreamLeader(ctx, js, federated.UpdateStream); err != nil || leader == "" {
		t.Errorf("update stream after the loss: leader %q, %v", leader, err)
	} else {
		t.Logf("update stream led by %s after the loss", leader)
	}
}
