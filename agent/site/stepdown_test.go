package site

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeaderStepsDownWhenAnotherHolds: another agent writes itself into
// the Lease with a live term (it took it while this leader was stalled,
// or cut off from the apiserver, for longer than the Lease duration). The
// leader's next renewal conflicts and its read shows the other holder: it
// has lost the Lease, so it stops its leader-only components then, not
// after retrying for the whole renew deadline (10 s here) while the other
// agent leads too. It does not take the Lease back during that term.
//
// On casClientset, as the apiserver does, node-a's write over its stale
// copy is refused.
func TestLeaderStepsDownWhenAnotherHolds(t *testing.T) {
	client := casClientset()
	p := &probe{client: client}
	cfg := fastConfig(client, "node-a", p)
	// lease 15 s > renew 10 s > 1.2 x retry 0.2 s: the leader renews
	// every 0.2 s; retrying a failing renewal would last 10 s
	cfg.LeaseDuration, cfg.RenewDeadline = 15*time.Second, 10*time.Second
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runBackground(t, e.Run)
	poll(t, 10*time.Second, "leadership", func() (bool, string) { return e.IsLeader() && p.runs.Load() == 1, e.Leader() })

	leases := client.CoordinationV1().Leases(testNS)
	l, err := leases.Get(context.Background(), LeaseName("store-1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, dur, now := "node-b", int32(3600), metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime = &other, &dur, &now, &now
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := time.Now()
	poll(t, 3*time.Second, "stepping down", func() (bool, string) {
		p.mu.Lock()
		stopped := len(p.holderAtStop)
		p.mu.Unlock()
		return !e.IsLeader() && stopped == 1, fmt.Sprintf("leading %v, components stopped %d, observed leader %q", e.IsLeader(), stopped, e.Leader())
	})
	t.Logf("stepped down %v after another agent took the Lease", time.Since(took).Round(time.Millisecond))
	if h := holder(t, client); h != "node-b" || e.Leader() != "node-b" || p.runs.Load() != 1 {
		t.Fatalf("holder %q, observed %q, %d runs: want node-b's term left alone, 1 run", h, e.Leader(), p.runs.Load())
	}
}
