package coordinator_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/coordinator/bus"
	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// TestHAConsumerDeletedDeposes: an active replica whose update consumer
// (coordinator-e<epoch>) is deleted — only a later active deletes it —
// stops deposed (ErrDeposed, with bus.ErrConsumerGone), and gives the
// lease up, instead of fetching from nothing for ever while it keeps the
// lease (no replica would then ingest anything).
func TestHAConsumerDeletedDeposes(t *testing.T) {
	url := fltest.StartNATS(t).ClientURL()
	signer, reg := haKeys(t)
	cfg := fltest.CoordinatorConfig(t.TempDir(), reg, signer)
	cfg.HA, cfg.ReplicaID, cfg.LeaseTTL, cfg.CheckpointEvery = true, "a", 2*time.Second, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- coordinator.RunReplica(ctx, cfg, fltest.Connect(t, url, "coordinator-a"), fltest.SmallModel(t, 1))
	}()
	js, err := jetstream.New(fltest.Connect(t, url, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	var name string
	fltest.Eventually(t, 30*time.Second, "the active's update consumer", func() (bool, string) {
		s, err := js.Stream(ctx, federated.UpdateStream)
		if err != nil {
			return false, err.Error()
		}
		for n := range s.ConsumerNames(ctx).Name() {
			if strings.HasPrefix(n, bus.ConsumerName+"-e") {
				name = n
			}
		}
		return name != "", "none yet"
	})
	if err := js.DeleteConsumer(ctx, federated.UpdateStream, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, coordinator.ErrDeposed) || !errors.Is(err, bus.ErrConsumerGone) {
			t.Fatalf("replica stopped with %v, want ErrDeposed (consumer gone)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("replica still active %v after its consumer %s was deleted", 30*time.Second, name)
	}
	lease, err := js.KeyValue(ctx, coordinator.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Get(ctx, replica.LeaseKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("lease after the replica stopped: %v, want it given up", err)
	}
}

// TestHADeposedDuringBootstrap: a replica that loses its lease while it
// bootstraps the first model (the cluster's first active, its store
// empty) stops with ErrDeposed, as it does at any later step, not with
// the cancellation the deposal caused: edge-coordinator takes an error
// that is a cancellation for a clean stop (exit status 0), and the
// replica is to exit with status 1 so that its supervisor starts it
// again as a standby.
func TestHADeposedDuringBootstrap(t *testing.T) {
	url := fltest.StartNATS(t).ClientURL()
	signer, reg := haKeys(t)
	js, err := jetstream.New(fltest.Connect(t, url, "impostor"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fltest.CoordinatorConfig(t.TempDir(), reg, signer)
	cfg.HA, cfg.ReplicaID, cfg.LeaseTTL, cfg.CheckpointEvery = true, "a", 2*time.Second, time.Hour
	cfg.Calibrate = func(ctx context.Context, _ *nn.Model) ([]float32, error) {
		// another replica takes the lease meanwhile
		lease, err := js.KeyValue(ctx, coordinator.LeaseBucket)
		if err == nil {
			_, err = lease.Put(ctx, replica.LeaseKey, []byte(`{"replica":"b"}`))
		}
		if err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = coordinator.RunReplica(ctx, cfg, fltest.Connect(t, url, "coordinator-a"), fltest.SmallModel(t, 1))
	if ctx.Err() != nil {
		t.Fatalf("replica still bootstrapping a minute after its lease was taken")
	}
	if !errors.Is(err, coordinator.ErrDeposed) || errors.Is(err, context.Canceled) {
		t.Fatalf("replica deposed while bootstrapping stopped with %v, want ErrDeposed", err)
	}
}

// haKeys is a coordinator's signing key and a registry of one site,
// site-a.
func haKeys(t *testing.T) (*quant.Signer, *federated.Registry) {
	t.Helper()
	signer, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{7}))
	if err != nil {
		t.Fatal(err)
	}
	_, sitePub, err := quant.GenerateKey(rand.NewChaCha8([32]byte{8}))
	if err != nil {
		t.Fatal(err)
	}
	reg := &federated.Registry{}
	if err := reg.Add("site-a", sitePub); err != nil {
		t.Fatal(err)
	}
	return signer, reg
}
