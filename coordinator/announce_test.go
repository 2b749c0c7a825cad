package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// TestRoundAnnouncedAfterFailure: a round whose announcement failed when
// it opened (the state bucket unavailable for a moment: a JetStream
// leader election, a restarting server) is announced again by the
// deadline ticker once the bucket answers. It used to stay stored and
// unannounced, so no site sent anything and a sync round failed at its
// deadline for want of a quorum.
func TestRoundAnnouncedAfterFailure(t *testing.T) {
	url := fltest.StartNATS(t).ClientURL()
	signer, reg := haKeys(t)
	cfg := fltest.CoordinatorConfig(t.TempDir(), reg, signer)
	c, _ := fltest.RunCoordinator(t, url, cfg, fltest.SmallModel(t, 1))
	ctx := t.Context()
	js, err := jetstream.New(fltest.Connect(t, url, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	fltest.Eventually(t, 30*time.Second, "the first model announced", func() (bool, string) {
		kv, err := js.KeyValue(ctx, federated.StateBucket)
		if err != nil {
			return false, err.Error()
		}
		if _, err := kv.Get(ctx, federated.KeyModel); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err := js.DeleteKeyValue(ctx, federated.StateBucket); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRound(context.Background())
	if err == nil {
		t.Fatalf("round %+v announced with no state bucket", r)
	}
	rec, rerr := c.RoundRecord(1)
	if rerr != nil || rec.State != "collecting" {
		t.Fatalf("round 1 after the failed announcement: %+v %v (start: %v)", rec, rerr, err)
	}
	// the bucket back, as the coordinator makes it (bus.Setup)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: federated.StateBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	fltest.Eventually(t, 30*time.Second, "round 1 announced again", func() (bool, string) {
		e, err := kv.Get(ctx, federated.KeyRound)
		if err != nil {
			return false, err.Error()
		}
		a, err := federated.DecodeAnnouncement(e.Value())
		if err != nil {
			return false, err.Error()
		}
		return a.Round == 1, fmt.Sprintf("round %d announced", a.Round)
	})
}
