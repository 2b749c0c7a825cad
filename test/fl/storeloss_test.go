package fl

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// TestLostStoreContinuesAboveHWM: a single-agent site whose agent.db is
// lost (an SD card replaced: a new data directory, the same site key)
// starts its sequence at 1 again. The coordinator refuses that update as
// a replay and says in the ack how far the site had come (its high-water
// mark, 3 after three rounds), the agent continues above it, and its next
// update is accepted: one update lost, where every update used to be
// refused until the new store's count passed the old mark (three rounds
// here, hundreds on a site with a long history).
func TestLostStoreContinuesAboveHWM(t *testing.T) {
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 1)
	cfg := f.coordinatorConfig(t.TempDir())
	// (the shortest de-duplication window JetStream takes: the stream
	// drops a message whose ID, site and sequence, it stored within the
	// window, so the new store's sequence 1 reaches the coordinator only
	// after it; an SD card takes longer than the default 2 minutes to
	// replace)
	cfg.MinUpdates, cfg.RoundDuration, cfg.DuplicateWindow = 1, time.Hour, 100*time.Millisecond
	c, _ := f.runCoordinator(cfg, fltest.SmallModel(t, 1))
	site := f.sites[0]
	// round starts a round and waits until it published a model with the
	// site's update in it
	round := func(what string) {
		t.Helper()
		r, err := c.StartRound(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fltest.Eventually(t, 30*time.Second, what, func() (bool, string) {
			rr, _ := c.RoundRecord(r.Round)
			return rr.State == coordinator.StatePublished && rr.Accepted == 1, fmt.Sprintf("%+v", rr)
		})
	}
	old := f.startAgent(site, filepath.Join(t.TempDir(), "old"), f.synthetic(0.001), nil)
	for i := range 3 {
		round(fmt.Sprintf("round %d with the old store's update", i+1))
	}
	stored := time.Now() // sequence 3's message is in the stream
	if st, err := old.c.Status(); err != nil || st.Seq != 3 {
		t.Fatalf("old store: %+v, %v; want sequence 3", st, err)
	}
	old.stop()
	fltest.Eventually(t, 10*time.Second, "the de-duplication window to pass", func() (bool, string) {
		return time.Since(stored) > 3*cfg.DuplicateWindow, ""
	})

	// the new store trains for the round it finds announced (round 3,
	// closed) with sequence 1: a replay, acked with the mark
	fresh := f.startAgent(site, filepath.Join(t.TempDir(), "new"), f.synthetic(0.001), nil)
	fltest.Eventually(t, 30*time.Second, "the replay ack and the catch-up", func() (bool, string) {
		st, err := fresh.c.Status()
		return err == nil && st.Counters.Duplicate == 1 && st.Counters.SequenceCatchUps == 1 && st.Seq == 3, fmt.Sprintf("%+v %v", st, err)
	})
	round("round 4 with the new store's update")
	st, err := fresh.c.Status()
	if err != nil || st.Seq != 4 || st.Counters.Accepted != 1 || st.Counters.Duplicate != 1 {
		t.Fatalf("new store after round 4: %+v, %v; want sequence 4, 1 accepted, 1 duplicate", st, err)
	}
	sites, err := c.Sites()
	if err != nil || len(sites) != 1 || sites[0].Site.HWM != 4 || sites[0].Site.Accepted != 4 {
		t.Fatalf("coordinator's record: %+v, %v; want high-water mark 4, 4 accepted", sites, err)
	}
}
