package site

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgesched/edgesched/kubefmt"
)

func TestLeaseSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int32
	}{
		{time.Second, 1},
		{1500 * time.Millisecond, 2}, // rounded up: a standby never waits less than configured
		{15 * time.Second, 15},
		{15*time.Second + time.Nanosecond, 16},
	} {
		if got := leaseSeconds(tc.d); got != tc.want {
			t.Errorf("leaseSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestSpec: the holder's spec on a new Lease, a renewal and a takeover.
func TestSpec(t *testing.T) {
	e, err := New(fastConfig(fake.NewClientset(), "node-a"))
	if err != nil {
		t.Fatal(err)
	}
	e.lease = newLeaseState(e.cfg)
	t0 := metav1.NewMicroTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	now := metav1.NewMicroTime(t0.Add(time.Minute))
	me, other, three := "node-a_1", "node-b_1", int32(3)
	for _, tc := range []struct {
		name        string
		old         *coordinationv1.LeaseSpec
		acquire     metav1.MicroTime
		transitions int32
	}{
		{"new Lease", nil, now, 0},
		// a renewal keeps the term's start and the count
		{"renewal", &coordinationv1.LeaseSpec{HolderIdentity: &me, AcquireTime: &t0, LeaseTransitions: &three}, t0, 3},
		// a takeover starts a term and counts it: 3 + 1
		{"takeover", &coordinationv1.LeaseSpec{HolderIdentity: &other, AcquireTime: &t0, LeaseTransitions: &three}, now, 4},
		{"after a release", &coordinationv1.LeaseSpec{HolderIdentity: new(string), AcquireTime: &t0, LeaseTransitions: &three}, now, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := e.spec(tc.old, now)
			// fastConfig's lease of 1.5 s is written as 2 s
			if str(sp.HolderIdentity) != "node-a_1" || i32(sp.LeaseDurationSeconds) != 2 || !sp.RenewTime.Equal(&now) {
				t.Fatalf("holder %q, duration %d, renew %v", str(sp.HolderIdentity), i32(sp.LeaseDurationSeconds), sp.RenewTime)
			}
			if !sp.AcquireTime.Equal(&tc.acquire) || i32(sp.LeaseTransitions) != tc.transitions {
				t.Fatalf("acquire %v, transitions %d; want %v, %d", sp.AcquireTime, i32(sp.LeaseTransitions), tc.acquire, tc.transitions)
			}
		})
	}
}

// TestHeldByOther: another holder's term runs for its duration from when
// this agent saw the spec change, on this agent's clock.
func TestHeldByOther(t *testing.T) {
	e, err := New(fastConfig(fake.NewClientset(), "node-a"))
	if err != nil {
		t.Fatal(err)
	}
	e.lease = newLeaseState(e.cfg)
	seen := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ten := int32(10)
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &ten}}
	}
	for _, tc := range []struct {
		name   string
		holder string
		at     time.Duration // after seen
		want   bool
	}{
		{"other, fresh", "node-b", 9 * time.Second, true},
		{"other, expired", "node-b", 10 * time.Second, false}, // seen + 10 s: the term is over
		{"nobody", "", time.Second, false},
		{"me", "node-a_1", time.Second, false},
		// the same node name, another process
		{"my node, another instance", "node-a_2", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.lease.seenAt = time.Time{}
			e.observe(lease(tc.holder), seen)
			if got := e.heldByOther(seen.Add(tc.at)); got != tc.want {
				t.Fatalf("heldByOther = %v, want %v", got, tc.want)
			}
		})
	}
	// observing the same spec again does not restart the term
	e.lease.seenAt = time.Time{}
	e.observe(lease("node-b"), seen)
	e.observe(lease("node-b"), seen.Add(5*time.Second))
	if e.heldByOther(seen.Add(10 * time.Second)) {
		t.Fatal("an unchanged spec restarted the holder's term")
	}
	if e.Leader() != "node-b" {
		t.Fatalf("observed leader %q", e.Leader())
	}
}

// leaderAndStandby runs an elector of ca until it leads, then one of cb
// until it observes the first as leader. stopA ends the first's Run and
// waits for it; the second is stopped when the test ends.
func leaderAndStandby(t *testing.T, ca, cb Config) (a, b *Elector, stopA func()) {
	t.Helper()
	a, err := New(ca)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = New(cb); err != nil {
		t.Fatal(err)
	}
	actx, cancelA := context.WithCancel(context.Background())
	bctx, cancelB := context.WithCancel(context.Background())
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	var once sync.Once
	stopA = func() { once.Do(func() { cancelA(); <-aDone }) }
	t.Cleanup(stopA)
	poll(t, 10*time.Second, "A leading", func() (bool, string) { return a.IsLeader(), a.Leader() })
	go func() { bDone <- b.Run(bctx) }()
	t.Cleanup(func() { cancelB(); <-bDone })
	poll(t, 10*time.Second, "B observing A", func() (bool, string) { return b.Leader() == ca.Identity, b.Leader() })
	return a, b, stopA
}

// TestElectorFailover (two agents on the fake clientset): B stands by
// while A renews; when A crashes (Lease kept), B takes over, but not
// before A's term ran out; the Lease counts the transition.
func TestElectorFailover(t *testing.T) {
	client := fake.NewClientset()
	pa, pb := &probe{client: client}, &probe{client: client}
	ca, cb := fastConfig(client, "node-a", pa), fastConfig(client, "node-b", pb)
	ca.KeepLeaseOnStop, cb.Seed = true, 2
	_, b, crashA := leaderAndStandby(t, ca, cb)
	// B sees A as leader and stays standing by over 3 Lease durations
	// (2 s each: fastConfig's 1.5 s rounded up) of A's renewals
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if b.IsLeader() || pb.runs.Load() != 0 {
			t.Fatal("B took the Lease A renews")
		}
		time.Sleep(50 * time.Millisecond)
	}
	crashA()
	crashed := time.Now()
	poll(t, 10*time.Second, "B leading", func() (bool, string) { return b.IsLeader() && pb.runs.Load() == 1, b.Leader() })
	// A renewed at most one retry period (0.2 s) before it crashed, and B
	// counts the 2 s term from when it saw that renewal: no takeover
	// before 2 s - 0.2 s = 1.8 s after the crash
	if took := time.Since(crashed); took < 1800*time.Millisecond {
		t.Fatalf("B took over %v after A's crash, inside A's term", took)
	}
	l, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), LeaseName("store-1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if str(l.Spec.HolderIdentity) != "node-b_1" || i32(l.Spec.LeaseTransitions) != 1 || l.Labels[kubefmt.LabelSite] != "store-1" {
		t.Fatalf("Lease %+v, labels %v; want node-b after 1 transition, labelled", l.Spec, l.Labels)
	}
}

// TestOneNodeNameOneLeader: two agent processes given one node name (a
// misconfiguration, or the old and the new pod of a rolling update) are
// two instances in the Lease: one leads, the other stands by through
// several of its renewals. Both used to lead, each taking the other's
// renewals for its own.
func TestOneNodeNameOneLeader(t *testing.T) {
	client := fake.NewClientset()
	pa, pb := &probe{client: client}, &probe{client: client}
	ca, cb := fastConfig(client, "node-a", pa), fastConfig(client, "node-a", pb)
	ca.Instance, cb.Instance, cb.Seed = "", "", 2 // drawn by New, as in the agent
	a, err := New(ca)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cb)
	if err != nil {
		t.Fatal(err)
	}
	if a.Holder() == b.Holder() || HolderNode(a.Holder()) != "node-a" {
		t.Fatalf("holders %q and %q: want two instances of node-a", a.Holder(), b.Holder())
	}
	runBackground(t, a.Run)
	runBackground(t, b.Run)
	// until the Lease has been renewed over 3 durations (2 s each) after
	// the first term began, exactly one of them leads at every look
	var first *metav1.MicroTime
	poll(t, 20*time.Second, "three Lease durations of one leader", func() (bool, string) {
		if a.IsLeader() && b.IsLeader() {
			t.Fatalf("both instances of node-a lead (runs %d and %d)", pa.runs.Load(), pb.runs.Load())
		}
		l, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), LeaseName("store-1"), metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, fmt.Sprintf("no Lease yet (%v)", err)
		}
		if first == nil {
			first = l.Spec.AcquireTime
		}
		return l.Spec.RenewTime.Sub(first.Time) > 6*time.Second, fmt.Sprintf("held by %s", str(l.Spec.HolderIdentity))
	})
	if runs := pa.runs.Load() + pb.runs.Load(); runs != 1 {
		t.Fatalf("leader components started %d times, want once", runs)
	}
}

// TestStandbyWatchesLease: a standby whose periodic tries are an hour
// apart still takes over within seconds. When the leader releases the
// Lease, at once: the watch tells it (A's term here is a minute, so
// without the watch B would wait for that). When the leader crashes,
// the moment its term (2 s, from its last renewal as B saw it through
// the watch) runs out, not at B's next periodic try.
func TestStandbyWatchesLease(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool // else a graceful stop, which releases the Lease
	}{
		{"leader releases the Lease", false},
		{"leader crashes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			pa, pb := &probe{client: client}, &probe{client: client}
			ca, cb := fastConfig(client, "node-a", pa), fastConfig(client, "node-b", pb)
			ca.KeepLeaseOnStop = tc.crash
			if !tc.crash {
				ca.LeaseDuration = time.Minute
			}
			// lease 3 h > renew 2 h > 1.2 x retry 1 h: B tries once an hour
			cb.LeaseDuration, cb.RenewDeadline, cb.RetryPeriod, cb.Seed = 3*time.Hour, 2*time.Hour, time.Hour, 2
			_, b, stopA := leaderAndStandby(t, ca, cb)
			// B's first try failed and its next periodic one is an hour
			// away; A renews a few times (each a watch event for B)
			renewals := 0
			var last time.Time
			poll(t, 10*time.Second, "three renewals by A", func() (bool, string) {
				l, err := client.CoordinationV1().Leases(testNS).Get(context.Background(), LeaseName("store-1"), metav1.GetOptions{})
				if err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Time.Equal(last) {
					last = l.Spec.RenewTime.Time
					renewals++
				}
				return renewals >= 3, fmt.Sprintf("%d renewals seen", renewals)
			})
			if b.IsLeader() {
				t.Fatal("B took the Lease A renews")
			}
			stopA()
			stopped := time.Now()
			poll(t, 15*time.Second, "B leading", func() (bool, string) { return b.IsLeader() && pb.runs.Load() == 1, b.Leader() })
			took := time.Since(stopped)
			t.Logf("B led %v after A stopped", took.Round(time.Millisecond))
			// a crashed A's term: 2 s (1.5 s rounded up) from its last
			// renewal, at most one retry (0.2 s) before the crash
			if tc.crash && took < 1800*time.Millisecond {
				t.Fatalf("B took over %v after A's crash, inside A's term", took)
			}
		})
	}
}

// TestWatchedEvents: what a standby makes of the Lease's watch events.
func TestWatchedEvents(t *testing.T) {
	e, err := New(fastConfig(fake.NewClientset(), "node-a"))
	if err != nil {
		t.Fatal(err)
	}
	e.lease = newLeaseState(e.cfg)
	held := func(holder string, renew time.Time) *coordinationv1.Lease {
		d := int32(15)
		rt := metav1.NewMicroTime(renew)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("store-1"), Namespace: testNS},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &rt}}
	}
	t0 := time.Now()
	other := held("node-b", t0)
	other.Name = "edgesched-site-other"
	for _, tc := range []struct {
		name          string
		ev            watch.Event
		changed, free bool // watched's answers
		termEnd       bool // another holder's term is known afterwards
	}{
		{"renewal by another agent", watch.Event{Type: watch.Modified, Object: held("node-b", t0)}, true, false, true},
		{"the same Lease replayed by a new watch", watch.Event{Type: watch.Added, Object: held("node-b", t0)}, false, false, true},
		{"another site's Lease", watch.Event{Type: watch.Modified, Object: other}, false, false, true},
		{"bookmark", watch.Event{Type: watch.Bookmark, Object: held("node-b", t0)}, false, false, true},
		{"error", watch.Event{Type: watch.Error, Object: &metav1.Status{Message: "too old"}}, false, false, true},
		{"released", watch.Event{Type: watch.Modified, Object: held("", t0.Add(time.Second))}, true, true, false},
		{"taken again", watch.Event{Type: watch.Added, Object: held("node-c", t0.Add(2*time.Second))}, true, false, true},
		{"deleted", watch.Event{Type: watch.Deleted, Object: held("node-c", t0.Add(2*time.Second))}, true, true, false},
	} {
		if changed, free := e.watched(tc.ev); changed != tc.changed || free != tc.free {
			t.Errorf("%s: watched changed %v free %v, want %v, %v", tc.name, changed, free, tc.changed, tc.free)
		}
		end, ok := e.termEnd()
		if ok != tc.termEnd {
			t.Errorf("%s: term end known %v, want %v", tc.name, ok, tc.termEnd)
		}
		// a term is counted 15 s from when this agent saw the change
		if ok && (end.Before(t0.Add(15*time.Second)) || end.After(time.Now().Add(15*time.Second))) {
			t.Errorf("%s: term ends %v, want 15 s after it was seen (from %v)", tc.name, end, t0)
		}
	}
	if e.Leader() != "" {
		t.Errorf("observed leader %q after the Lease was deleted, want none", e.Leader())
	}
}

// TestStandbyDoesNotHammerFailingAPI: another agent's term (1 s) runs out
// and every attempt to take the Lease fails (the apiserver refuses the
// update). The standby tries once when the term ends and then waits for
// its periodic try (an hour away): it must not retry in a loop. Counted:
// the Lease API calls in the 1.5 s after the term's end.
func TestStandbyDoesNotHammerFailingAPI(t *testing.T) {
	client := fake.NewClientset()
	var updates, gets atomic.Int64
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates.Add(1)
		return true, nil, errors.New("apiserver refuses writes")
	})
	client.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	holder, one, now := "node-b", int32(1), metav1.NewMicroTime(time.Now())
	if _, err := client.CoordinationV1().Leases(testNS).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName("store-1"), Namespace: testNS},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &one, RenewTime: &now, AcquireTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(client, "node-a")
	// lease 3 h > renew 2 h > 1.2 x retry 1 h
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 3*time.Hour, 2*time.Hour, time.Hour
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runBackground(t, e.Run)
	// the first try at once (Get: held), the second when the 1 s term
	// ends (Get, then the refused Update)
	poll(t, 10*time.Second, "the try at the term's end", func() (bool, string) {
		return updates.Load() >= 1, fmt.Sprintf("%d updates", updates.Load())
	})
	u, g := updates.Load(), gets.Load()
	time.Sleep(1500 * time.Millisecond) // counting calls over an interval: nothing to poll for
	if du, dg := updates.Load()-u, gets.Load()-g; du > 0 || dg > 0 {
		t.Fatalf("%d updates and %d gets in 1.5 s after a refused take, with the next periodic try an hour away", du, dg)
	}
	if e.IsLeader() {
		t.Fatal("leading without a successful write")
	}
}

// TestElectorStepsDownWhenRenewalsFail: while every Lease call fails the
// leader keeps its components for the renew deadline, then stops them;
// once the API answers again it takes its own Lease back.
func TestElectorStepsDownWhenRenewalsFail(t *testing.T) {
	client := fake.NewClientset()
	var failing atomic.Bool
	client.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("apiserver unreachable")
		}
		return false, nil, nil
	})
	p := &probe{client: client}
	e, err := New(fastConfig(client, "node-a", p))
	if err != nil {
		t.Fatal(err)
	}
	runBackground(t, e.Run)
	poll(t, 10*time.Second, "leadership", func() (bool, string) { return e.IsLeader() && p.runs.Load() == 1, e.Leader() })
	failing.Store(true)
	cut := time.Now()
	poll(t, 10*time.Second, "stepping down", func() (bool, string) { return !e.IsLeader(), "" })
	// the renewal that fails started at most a retry period (0.2 s)
	// after the cut and gives up after the renew deadline (1 s): not
	// before 1 s
	if d := time.Since(cut); d < time.Second {
		t.Fatalf("stepped down %v after renewals began to fail, before the renew deadline", d)
	}
	failing.Store(false)
	poll(t, 10*time.Second, "leading again", func() (bool, string) { return e.IsLeader() && p.runs.Load() == 2, e.Leader() })
	if l, s := testutil.ToFloat64(e.transitions.WithLabelValues("leader")), testutil.ToFloat64(e.transitions.WithLabelValues("standby")); l != 2 || s != 1 {
		t.Fatalf("transitions leader %v, standby %v; want 2 and 1", l, s)
	}
}
