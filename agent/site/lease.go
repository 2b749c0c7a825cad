package site

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/edgesched/edgesched/kubefmt"
)

// The election on the site Lease (docs/site-leader.md, "Leader
// election"). Its rules are client-go's leader election's:
//
//   - A candidate takes the Lease when it does not exist, when it names
//     no holder, or when the holder let it expire: the Lease's spec has
//     not changed for leaseDurationSeconds as measured by the candidate's
//     own clock since it last saw the spec change (so clock skew between
//     nodes does not matter).
//   - Every write is an update of the Lease read last (its
//     resourceVersion), so of two candidates at most one wins; the other
//     gets a conflict.
//   - The holder renews every RetryPeriod; a renewal that keeps failing
//     (conflicts, API errors) for RenewDeadline ends the term, and one
//     that reads another holder with a live term ends it at once.
//   - On a graceful stop the holder writes an empty holder with a 1 s
//     duration, so a standby takes over at its next try.
//
// One addition: a standby also watches the Lease. Each renewal it sees
// as it happens (not up to a retry period later), so its count of the
// holder's term starts at the holder's last renewal, and it tries again
// the moment that term runs out — or at once when the Lease is released
// or deleted — rather than at its next periodic try. A crashed leader is
// replaced within LeaseDuration of its last renewal (plus the API's
// round trips) instead of up to (1+JitterFactor) x RetryPeriod later. The
// watch is best effort: when it cannot be opened or ends, the standby
// keeps to the periodic tries and opens it again at the next one.
//
// It is written against kube.LeaseInterface rather than with client-go's
// tools/leaderelection, whose resourcelock package imports client-go's
// whole clientset (and with it every API group) into the agent binary.

// leaseState is what the elector last saw of the Lease. Owned by Run's
// goroutine.
type leaseState struct {
	name, namespace string
	duration        int32 // seconds, written into the Lease
	rng             *rand.Rand

	cached   *coordinationv1.Lease // the Lease as last read or written
	observed coordinationv1.LeaseSpec
	seenAt   time.Time // when the spec last changed, on our clock
	failing  bool      // the last API call failed (logged once per streak)
}

func newLeaseState(cfg Config) leaseState {
	return leaseState{name: LeaseName(cfg.Site), namespace: cfg.Namespace,
		duration: leaseSeconds(cfg.LeaseDuration), rng: rand.New(rand.NewPCG(cfg.Seed, 0x1ea5e))}
}

// leaseSeconds is d in the Lease's whole seconds, rounded up so that a
// standby never counts less than LeaseDuration (1.5 s is 2 s).
func leaseSeconds(d time.Duration) int32 { return int32((d + time.Second - 1) / time.Second) }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func i32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// sameSpec reports whether two specs name the same holder, times,
// duration and transitions.
func sameSpec(a, b coordinationv1.LeaseSpec) bool {
	mt := func(x, y *metav1.MicroTime) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Equal(y)
	}
	return str(a.HolderIdentity) == str(b.HolderIdentity) && i32(a.LeaseDurationSeconds) == i32(b.LeaseDurationSeconds) &&
		i32(a.LeaseTransitions) == i32(b.LeaseTransitions) && mt(a.AcquireTime, b.AcquireTime) && mt(a.RenewTime, b.RenewTime)
}

// observe records l as the Lease's current state, seen at now.
func (e *Elector) observe(l *coordinationv1.Lease, now time.Time) {
	s := &e.lease
	s.cached = l
	if s.seenAt.IsZero() || !sameSpec(s.observed, l.Spec) {
		s.observed, s.seenAt = *l.Spec.DeepCopy(), now
	}
	if h := str(l.Spec.HolderIdentity); h != "" && h != e.leader.Load().(string) { // (the holder, not Leader's node name)
		e.leader.Store(h)
		e.log.Info("site leader", "leader", h)
	}
}

// heldByOther reports whether the last observed spec names another holder
// whose term has not run out at now.
func (e *Elector) heldByOther(now time.Time) bool {
	s := &e.lease
	h := str(s.observed.HolderIdentity)
	if h == "" || h == e.holder {
		return false
	}
	return now.Before(s.seenAt.Add(time.Duration(i32(s.observed.LeaseDurationSeconds)) * time.Second))
}

// apiFailed logs an API error once per streak of failures.
func (e *Elector) apiFailed(what string, err error) {
	if apierrors.IsConflict(err) {
		e.log.Debug("site lease changed meanwhile", "op", what, "err", err)
		return
	}
	if !e.lease.failing {
		e.log.Warn("site lease: API call failed; retrying", "op", what, "err", err)
	}
	e.lease.failing = true
}

// spec is the spec this agent writes as holder at now, continuing from
// old (nil: a new Lease).
func (e *Elector) spec(old *coordinationv1.LeaseSpec, now metav1.MicroTime) coordinationv1.LeaseSpec {
	id, dur := e.holder, e.lease.duration
	sp := coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now}
	var transitions int32
	if old != nil {
		transitions = i32(old.LeaseTransitions)
		if str(old.HolderIdentity) == id { // a renewal: the term goes on
			sp.AcquireTime = old.AcquireTime
		} else {
			transitions++
		}
	}
	sp.LeaseTransitions = &transitions
	return sp
}

// tryAcquireOrRenew makes one attempt to take or keep the Lease. It
// returns true when this agent holds it afterwards.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) bool {
	leases := e.cfg.Client.Leases(e.lease.namespace)
	start := time.Now()
	now := metav1.NewMicroTime(start)
	labels := map[string]string{kubefmt.LabelSite: e.cfg.Site}

	// Renewing a Lease we hold: write over the copy we have; a conflict
	// means someone else wrote it, and the slow path finds out who.
	if c := e.lease.cached; c != nil && str(c.Spec.HolderIdentity) == e.holder &&
		start.Before(e.lease.seenAt.Add(time.Duration(i32(c.Spec.LeaseDurationSeconds))*time.Second)) {
		l := c.DeepCopy()
		l.Spec = e.spec(&c.Spec, now)
		up, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			e.lease.failing = false
			e.observe(up, start)
			return true
		}
		e.apiFailed("renew", err)
	}

	l, err := leases.Get(ctx, e.lease.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sp := e.spec(nil, now)
		created, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: e.lease.name, Namespace: e.lease.namespace, Labels: labels}, Spec: sp}, metav1.CreateOptions{})
		if err != nil {
			e.apiFailed("create", err)
			return false
		}
		e.lease.failing = false
		e.observe(created, start)
		return true
	}
	if err != nil {
		e.apiFailed("get", err)
		return false
	}
	e.lease.failing = false
	// another holder's term is counted from when the reply arrived: the
	// later, the safer
	seen := time.Now()
	e.observe(l, seen)
	if e.heldByOther(seen) {
		return false
	}
	l = l.DeepCopy()
	l.Spec = e.spec(&l.Spec, now)
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	for k, v := range labels {
		l.Labels[k] = v
	}
	up, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		e.apiFailed("take", err)
		return false
	}
	e.observe(up, start)
	return true
}

// expiryMargin is how long after the observed term's end a standby
// tries: past it on this clock, so the try is not refused as early.
const expiryMargin = 10 * time.Millisecond

// acquire tries to take the Lease every RetryPeriod x [1, 1+JitterFactor),
// and when the watched Lease's holder's term ends or the Lease is
// released, until it does (true) or ctx ends (false). After a failed try
// the next one waits at least until the holder's term ends or the next
// periodic try, whichever is first: never less, so an API that keeps
// failing is not hammered.
func (e *Elector) acquire(ctx context.Context) bool {
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	var events <-chan watch.Event // nil while no watch is open
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		ok := e.tryAcquireOrRenew(actx)
		cancel()
		if ok {
			return true
		}
		if events == nil {
			events = e.watchLease(wctx, &wg)
		}
		now := time.Now()
		next := now.Add(e.cfg.RetryPeriod + time.Duration(e.lease.rng.Float64()*JitterFactor*float64(e.cfg.RetryPeriod)))
		// another holder's term that ends before the next periodic try:
		// try the moment it ends (a term already over waits periodically:
		// the try that just failed saw it over)
		if end, ok := e.termEnd(); ok && end.After(now) && end.Add(expiryMargin).Before(next) {
			next = end.Add(expiryMargin)
		}
		timer := time.NewTimer(time.Until(next))
	wait:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return false
			case <-timer.C:
				break wait
			case ev, open := <-events:
				if !open {
					events = nil // reopened after the next try
					continue
				}
				changed, free := e.watched(ev)
				if !changed {
					continue
				}
				if free { // released or deleted: try now
					timer.Stop()
					break wait
				}
				// the holder renewed (its term moves on): try when it
				// ends, unless the periodic try comes first
				if end, ok := e.termEnd(); ok && end.After(time.Now()) {
					if at := end.Add(expiryMargin); at.Before(next) {
						timer.Stop()
						next = at
						timer.Reset(time.Until(at))
					}
				}
			}
		}
	}
	return false
}

// termEnd is when the other holder's term ends by the last observed spec
// (false: no other holder).
func (e *Elector) termEnd() (time.Time, bool) {
	s := &e.lease
	h := str(s.observed.HolderIdentity)
	if h == "" || h == e.holder || s.seenAt.IsZero() {
		return time.Time{}, false
	}
	return s.seenAt.Add(time.Duration(i32(s.observed.LeaseDurationSeconds)) * time.Second), true
}

// watchTimeout bounds one watch request: the apiserver ends it then (and
// the client's request timeout with it), and the next try opens another.
const watchTimeout = 5 * time.Minute

// watchLease relays a watch on the site's Lease from a goroutine that wg
// counts, until ctx ends or the watch does (then the channel closes; the
// periodic tries go on and the caller opens another after the next try).
// The watch is opened in the goroutine, so a slow or hung apiserver never
// holds up the election.
func (e *Elector) watchLease(ctx context.Context, wg *sync.WaitGroup) <-chan watch.Event {
	ch := make(chan watch.Event)
	leases, name, log := e.cfg.Client.Leases(e.lease.namespace), e.lease.name, e.log
	timeout := int64(watchTimeout / time.Second)
	wg.Go(func() {
		defer close(ch)
		w, err := leases.Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), TimeoutSeconds: &timeout})
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("site lease: watch not opened; trying periodically", "err", err)
			}
			return
		}
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	})
	return ch
}

// watched takes in a watch event of the Lease. changed reports a new
// spec (a renewal, a release, another holder) or a deletion; free that
// nobody holds the Lease now (released or deleted). A watch (re)opened
// replays the current Lease as added: an unchanged spec is no news.
func (e *Elector) watched(ev watch.Event) (changed, free bool) {
	switch ev.Type {
	case watch.Deleted:
		e.lease.cached, e.lease.observed, e.lease.seenAt = nil, coordinationv1.LeaseSpec{}, time.Time{}
		e.leader.Store("")
		return true, true
	case watch.Added, watch.Modified:
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok || l.Name != e.lease.name {
			return false, false
		}
		same := !e.lease.seenAt.IsZero() && sameSpec(e.lease.observed, l.Spec)
		e.observe(l, time.Now())
		return !same, str(l.Spec.HolderIdentity) == ""
	}
	return false, false // bookmarks; errors end the watch
}

// renewWhile renews the Lease every RetryPeriod until a renewal fails for
// RenewDeadline (false: the term is over) or stop is closed (true: still
// held). Each renewal retries every RetryPeriod within its deadline.
func (e *Elector) renewWhile(ctx context.Context, stop <-chan struct{}) bool {
	timer := time.NewTimer(e.cfg.RetryPeriod)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return true
		case <-timer.C:
		}
		if !e.renew(ctx, stop) {
			select {
			case <-stop: // stopping anyway: whether it is held is unknown
				return !e.heldByOther(time.Now())
			default:
				return false
			}
		}
		timer.Reset(e.cfg.RetryPeriod)
	}
}

// renew is one renewal: attempts every RetryPeriod until one succeeds or
// RenewDeadline passed (or stop is closed). An attempt that reads another
// holder with a live term ends it at once: the Lease is lost, and
// retrying until the deadline would leave two agents leading meanwhile.
func (e *Elector) renew(ctx context.Context, stop <-chan struct{}) bool {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	tick := time.NewTicker(e.cfg.RetryPeriod)
	defer tick.Stop()
	for {
		if e.tryAcquireOrRenew(rctx) {
			return true
		}
		if e.heldByOther(time.Now()) {
			e.log.Warn("the site lease is held by another agent: stepping down", "holder", str(e.lease.observed.HolderIdentity))
			return false
		}
		select {
		case <-rctx.Done():
			e.log.Warn("could not renew the site lease within the renew deadline", "deadline", e.cfg.RenewDeadline, "holder", str(e.lease.observed.HolderIdentity))
			return false
		case <-stop:
			return false
		case <-tick.C:
		}
	}
}

// release writes an empty holder with a 1 s duration into the Lease this
// agent holds, so a standby takes it at its next try. A conflict (the
// Lease changed meanwhile) leaves it as it is.
func (e *Elector) release(ctx context.Context) {
	c := e.lease.cached
	if c == nil || str(c.Spec.HolderIdentity) != e.holder {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	none, one := "", int32(1)
	l := c.DeepCopy()
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &none, &one, &now, &now
	up, err := e.cfg.Client.Leases(e.lease.namespace).Update(rctx, l, metav1.UpdateOptions{})
	if err != nil {
		e.log.Warn("could not release the site lease; it expires by itself", "err", err, "after", time.Duration(i32(c.Spec.LeaseDurationSeconds))*time.Second)
		return
	}
	e.observe(up, now.Time)
	e.log.Info("released the site lease")
}
