package site

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// testCoordinator runs an async (FedBuff, buffer 3) coordinator for site
// store-1 and returns it.
func testCoordinator(t *testing.T, url string, coordKey, siteKey *quant.Signer) *coordinator.Coordinator {
	t.Helper()
	reg := &federated.Registry{}
	if err := reg.Add("store-1", siteKey.Public()); err != nil {
		t.Fatal(err)
	}
	cfg := fltest.CoordinatorConfig(t.TempDir(), reg, coordKey)
	cfg.Mode, cfg.Buffer, cfg.AutoRounds = federated.Async, 3, true
	c, _ := fltest.RunCoordinator(t, url, cfg, smallModel(t, 1))
	return c
}

func siteRecord(t *testing.T, c *coordinator.Coordinator) coordinator.Site {
	t.Helper()
	ss, err := c.Sites()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Site.Site == "store-1" {
			return s.Site
		}
	}
	return coordinator.Site{}
}

// newSiteClient is one agent's FL client for store-1 on ledger l.
func newSiteClient(t *testing.T, dir string, siteKey, coordKey *quant.Signer, l *Ledger) *flclient.Client {
	t.Helper()
	cfg := flclient.DefaultConfig()
	cfg.Site, cfg.Signer, cfg.DataDir, cfg.ModelKeys, cfg.Sequencer = "store-1", siteKey, dir, keyring(t, coordKey), l
	cfg.Trainer = &flclient.SyntheticTrainer{Target: smallModel(t, 99).Net.Flat(), Rate: 0.5, Noise: 0.001, Samples: 100}
	cfg.AsyncInterval, cfg.OutboxLimit, cfg.ReportInterval = 50*time.Millisecond, 1000, 0
	cfg.BackoffMin, cfg.BackoffMax, cfg.PublishTimeout = 10*time.Millisecond, 200*time.Millisecond, 2*time.Second
	c, err := flclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run starts comp until the returned stop is called.
func run(comp Component) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = comp.Run(ctx) })
	return func() { cancel(); wg.Wait() }
}

// TestFLHandover (embedded NATS, the real coordinator, real bbolt; the
// site ledger on a fake clientset that checks resourceVersions, since A's
// late reservation races B's): agent A leads, delivers updates,
// loses its NATS link and queues more, and stops; agent B leads next,
// adopts A's unsent updates and delivers them before its own, continuing
// the sequence. The coordinator refuses none as a replay and decides on
// every update made; A, back, forgets what B delivered for it.
func TestFLHandover(t *testing.T) {
	srv := fltest.StartNATS(t)
	coordKey, siteKey := key(t, 10), key(t, 11)
	coord := testCoordinator(t, srv.ClientURL(), coordKey, siteKey)
	k8s := casClientset()
	la, lb := newLedger(t, k8s, "node-a"), newLedger(t, k8s, "node-b")
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	ca, cb := newSiteClient(t, dirA, siteKey, coordKey, la), newSiteClient(t, dirB, siteKey, coordKey, lb)
	ncA := fltest.Connect(t, srv.ClientURL(), "node-a")
	fa, err := NewFL(FLConfig{Client: ca, Conn: ncA, Ledger: la})
	if err != nil {
		t.Fatal(err)
	}
	stopA := run(fa)
	poll(t, 30*time.Second, "A to install a model and deliver updates", func() (bool, string) {
		st, _ := ca.Status()
		return st.Installed != nil && st.Counters.Published >= 2, fmt.Sprintf("%+v", st)
	})
	ncA.Close() // A's link goes down: it trains on and queues
	poll(t, 30*time.Second, "A to queue updates", func() (bool, string) {
		st, _ := ca.Status()
		return st.Outbox >= 3, fmt.Sprintf("outbox %d", st.Outbox)
	})
	stopA()
	stA, _ := ca.Status()
	pendingA, _ := ca.Outbox()
	hs, _ := la.Handovers(context.Background())
	if len(hs) < len(pendingA) {
		t.Fatalf("A holds %v but only %d handovers exist", pendingA, len(hs))
	}
	if err := ca.Close(); err != nil {
		t.Fatal(err)
	}

	fb, err := NewFL(FLConfig{Client: cb, Conn: fltest.Connect(t, srv.ClientURL(), "node-b"), Ledger: lb, AdoptInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopB := run(fb)
	poll(t, 30*time.Second, "B to deliver A's queued updates and its own", func() (bool, string) {
		s := siteRecord(t, coord)
		st, _ := cb.Status()
		return s.HWM > slices.Max(pendingA) && st.Counters.Published > len(pendingA), fmt.Sprintf("hwm %d, B %+v", s.HWM, st.Counters)
	})
	// A, an old leader that has not seen its term end, stages one more
	// update after B's term began: B adopts it within its AdoptInterval
	// and delivers it (its client then removes the handover), where it
	// used to wait for the next change of leader.
	lateSeq, err := la.Reserve(context.Background(), 0, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	late := lateUpdate(t, siteKey, lateSeq)
	if err := la.handOver(context.Background(), lateSeq, late); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "B to adopt and deliver A's late update", func() (bool, string) {
		hs, _ := lb.Handovers(context.Background())
		return !slices.ContainsFunc(hs, func(h Handover) bool { return h.Seq == lateSeq }), fmt.Sprintf("handovers %d, late %d", len(hs), lateSeq)
	})
	stopB()
	// a second term on the same client (leadership comes back to B)
	before, _ := cb.Status()
	stopB = run(fb)
	poll(t, 30*time.Second, "B to publish again in a second term", func() (bool, string) {
		st, _ := cb.Status()
		return st.Counters.Published > before.Counters.Published, fmt.Sprintf("%+v", st.Counters)
	})
	stopB()
	stB, _ := cb.Status()
	if stB.Seq <= slices.Max(pendingA) {
		t.Fatalf("B's sequence %d did not continue above A's %d", stB.Seq, slices.Max(pendingA))
	}
	hs, _ = lb.Handovers(context.Background())
	var hwm uint64
	poll(t, 10*time.Second, "the coordinator to settle", func() (bool, string) {
		h := siteRecord(t, coord).HWM
		ok := h == hwm
		hwm = h
		time.Sleep(100 * time.Millisecond)
		return ok, fmt.Sprint(h)
	})
	s := siteRecord(t, coord)
	verdicts := s.Accepted
	for reason, n := range s.Rejected {
		if reason == federated.ReasonReplay {
			t.Errorf("%d updates refused as replays", n)
		}
		verdicts += n
	}
	pending := 0 // handovers the coordinator has not seen yet (B stopped before sending them)
	for _, h := range hs {
		if h.Seq > s.HWM {
			pending++
		}
	}
	// every update either agent made (and A's late one) has a verdict or
	// is still handed over
	if made := stA.Counters.Trained + stB.Counters.Trained + 1; verdicts+pending != made {
		t.Fatalf("made %d updates (A %d, B %d); the coordinator decided on %d (%+v), %d still handed over", made, stA.Counters.Trained, stB.Counters.Trained, verdicts, s, pending)
	}
	t.Logf("A made %d (%d left queued at its stop), B made %d; verdicts %d (accepted %d), %d pending; site sequence %d",
		stA.Counters.Trained, len(pendingA), stB.Counters.Trained, verdicts, s.Accepted, pending, stB.Seq)

	// A comes back: its queued entries were delivered by B and are forgotten
	ca2 := newSiteClient(t, dirA, siteKey, coordKey, la)
	defer ca2.Close()
	r, err := la.Reconcile(context.Background(), ca2)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range pendingA {
		if !slices.Contains(r.Forgotten, seq) && seq <= s.HWM {
			t.Errorf("A's entry %d, delivered by B, was not forgotten (%+v)", seq, r)
		}
	}
	if err := cb.Close(); err != nil {
		t.Fatal(err)
	}
}

// lateUpdate is a signed update of store-1 with sequence seq (a small
// delta of another model's size: the coordinator judges and refuses it,
// which gives it a verdict all the same).
func lateUpdate(t *testing.T, siteKey *quant.Signer, seq uint64) []byte {
	t.Helper()
	base := strings.Repeat("ab", 32)
	payload, err := esu.Encode(&esu.Update{Base: base, Values: make([]float32, 8)}, esu.DefaultOptions(seq))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := federated.EncodeUpdateMsg(federated.UpdateHeader{Site: "store-1", Seq: seq, Round: 1, BaseModel: base, BaseVersion: 1,
		Samples: 10, Created: time.Unix(0, 0).UTC()}, payload, siteKey)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}
