package fl

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// siteRecord finds a site in the coordinator's view.
func siteRecord(t *testing.T, c *coordinator.Coordinator, site string) coordinator.Site {
	t.Helper()
	ss, err := c.Sites()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Site.Site == site {
			return s.Site
		}
	}
	return coordinator.Site{}
}

// TestCutOffAgentDeliversExactlyOnce: in asynchronous (FedBuff) mode one
// site loses its link (a TCP proxy cuts it) while the others drive five
// more model versions; the cut-off site keeps training from its installed
// model and buffers its updates in its bbolt outbox. When the link comes
// back (and flaps while the outbox drains) every buffered update reaches
// the coordinator exactly once: the site's high-water mark equals its last
// sequence, every sequence got a verdict, and none was seen twice.
func TestCutOffAgentDeliversExactlyOnce(t *testing.T) {
	srv := fltest.StartNATS(t)
	f := newFleet(t, srv.ClientURL(), 4)
	cfg := f.coordinatorConfig(t.TempDir())
	cfg.Mode, cfg.Buffer, cfg.AutoRounds = federated.Async, 3, true
	c, _ := f.runCoordinator(cfg, fltest.SmallModel(t, 1))
	var others []*agent
	for _, s := range f.sites[:3] {
		others = append(others, f.startAgent(s, filepath.Join(t.TempDir(), s), f.synthetic(0.001), func(cfg *flclient.Config) { cfg.AsyncInterval = 30 * time.Millisecond }))
	}
	p := newProxy(t, srv.Addr().String())
	cutSite := f.sites[3]
	f.url = p.URL()
	cut := f.startAgent(cutSite, filepath.Join(t.TempDir(), cutSite), f.synthetic(0.001), func(cfg *flclient.Config) {
		cfg.AsyncInterval = 60 * time.Millisecond
		cfg.OutboxLimit = 1000
	})
	fltest.Eventually(t, 30*time.Second, "the site to install a model and deliver an update", func() (bool, string) {
		st, _ := cut.c.Status()
		return st.Installed != nil && st.Counters.Published > 0, fmt.Sprintf("%+v", st)
	})
	p.Cut()
	v0 := mustModel(t, c).Version
	fltest.Eventually(t, 60*time.Second, "five versions without the site, and its buffered updates", func() (bool, string) {
		st, _ := cut.c.Status()
		v := mustModel(t, c).Version
		return v >= v0+5 && st.Outbox >= 3, fmt.Sprintf("version %d (from %d), outbox %d", v, v0, st.Outbox)
	})
	buffered, _ := cut.c.Status()
	t.Logf("cut off from version %d to %d with %d updates buffered", v0, mustModel(t, c).Version, buffered.Outbox)
	// The others have driven the versions; they stop, so that the
	// coordinator's backlog is finite: on a loaded machine (CI's two cores)
	// the cut-off site trained slowly while the others drove 135 versions,
	// and their queued updates kept its delivered ones from being
	// processed within the deadline.
	for _, a := range others {
		a.halt()
	}
	// The link comes back, flapping three times while the outbox drains.
	p.Restore()
	for range 3 {
		time.Sleep(40 * time.Millisecond)
		p.Cut()
		time.Sleep(20 * time.Millisecond)
		p.Restore()
	}
	fltest.Eventually(t, 30*time.Second, "the outbox to drain", func() (bool, string) {
		st, _ := cut.c.Status()
		return st.Outbox == 0, fmt.Sprintf("outbox %d", st.Outbox)
	})
	cut.halt()
	final, err := cut.c.Status()
	if err != nil {
		t.Fatal(err)
	}
	// Updates made after the drain and before the halt are still in the
	// outbox (durable, not lost): everything before them was delivered.
	delivered := final.Seq - uint64(final.Outbox)
	fltest.Eventually(t, 60*time.Second, "the coordinator to process every delivered sequence", func() (bool, string) {
		s := siteRecord(t, c, cutSite)
		return s.HWM == delivered, fmt.Sprintf("hwm %d, delivered %d", s.HWM, delivered)
	})
	s := siteRecord(t, c, cutSite)
	verdicts := s.Accepted
	for reason, n := range s.Rejected {
		if reason == federated.ReasonReplay && n > 0 {
			t.Errorf("%d updates reached the coordinator twice", n)
		}
		verdicts += n
	}
	if verdicts != int(delivered) || final.Counters.DroppedFull != 0 {
		t.Fatalf("site delivered %d updates; the coordinator decided on %d (%+v); dropped %d", delivered, verdicts, s, final.Counters.DroppedFull)
	}
	t.Logf("site %s: %d updates delivered (%d still queued), %d accepted (stale ones weighted down), rejected %v", cutSite, delivered, final.Outbox, s.Accepted, s.Rejected)
}

func mustModel(t *testing.T, c *coordinator.Coordinator) *coordinator.Model {
	t.Helper()
	m, err := c.ModelRecord(0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
