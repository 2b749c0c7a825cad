package extender

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Bindings in flight. kube-scheduler binds in a goroutine per pod and
// starts the next pod's scheduling cycle at once, so the extender may be
// asked to filter pod B before the binding of pod A, which it prioritized
// a moment ago, has reached its bind verb. Until then the extender does not
// know A's devices are taken (nor A's placement, for a scheduling policy's
// rules): B may pass filter on a node whose last free GPU share A is about
// to take, and its binding is then refused and retried after the
// scheduler's backoff (with node names only, 14 of 150 GPU-share bindings
// in the 200-node harness). With full Node objects each call is slow
// enough that this almost never happens; with names only it does.
//
// So the extender remembers the pods it filtered (with devices or
// placements to check: PreFilter not Skip) and then prioritized, whose
// binding has not arrived (inflight); only those: the scheduler calls
// prioritize for pods the filter-and-bind extender is not interested in
// too (the shipped GPU configuration ranks every pod), and binds those
// itself. A filter call whose answer depends on device
// occupancy or on placements (PreFilter not Skip) waits until every
// earlier such pod is bound (reserved) or given up, for at most
// BindWait: a pod the scheduler prioritized but then did not bind (a later
// plugin refused it, it was deleted) delays one filter call by at most
// that long, and is forgotten. A pod prioritized with a single feasible
// node is not seen here (the scheduler skips prioritize then); its
// binding is still checked at the bind verb, as before.

// DefaultBindWait bounds how long a filter call waits for the bindings of
// pods prioritized before it (ExtenderOptions.BindWait).
const DefaultBindWait = 250 * time.Millisecond

// inflight is the set of prioritized pods whose binding has not reached
// the bind verb's reservation. Safe for concurrent use.
type inflight struct {
	mu   sync.Mutex
	pods map[types.UID]time.Time // prioritized at
	// filtered are the pods filter checked (at), candidates for pods
	// when prioritized; bounded by maxFiltered.
	filtered map[types.UID]time.Time
	// changed is closed (and replaced) whenever a pod leaves the set.
	changed chan struct{}
	// waiters counts the calls blocked in wait (tests poll it).
	waiters atomic.Int32
}

func newInflight() *inflight {
	return &inflight{pods: map[types.UID]time.Time{}, filtered: map[types.UID]time.Time{}, changed: make(chan struct{})}
}

// maxFiltered bounds the filtered set (pods filtered and never
// prioritized: no node fitted, or only one did); filteredTTL is how long
// an entry counts.
const (
	maxFiltered = 4096
	filteredTTL = time.Minute
)

// filter marks uid filtered now.
func (f *inflight) filter(uid types.UID) {
	if uid == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if len(f.filtered) >= maxFiltered {
		for u, at := range f.filtered {
			if now.Sub(at) > filteredTTL {
				delete(f.filtered, u)
			}
		}
		if len(f.filtered) >= maxFiltered {
			clear(f.filtered)
		}
	}
	f.filtered[uid] = now
}

// prioritize marks uid in flight (its binding comes next) if filter saw
// it.
func (f *inflight) prioritize(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.filtered[uid]; ok {
		delete(f.filtered, uid)
		f.pods[uid] = time.Now()
	}
}

// done removes uid (its devices are reserved, or its binding failed).
func (f *inflight) done(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.filtered, uid)
	if _, ok := f.pods[uid]; ok {
		delete(f.pods, uid)
		f.wakeLocked()
	}
}

func (f *inflight) wakeLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitOutcome says how a wait ended.
type waitOutcome string

const (
	waitNone    waitOutcome = "none"    // nothing in flight: no wait
	waitBound   waitOutcome = "bound"   // every earlier pod's binding arrived
	waitExpired waitOutcome = "expired" // some were given up after the bound
	waitCancel  waitOutcome = "canceled"
)

// wait blocks until no pod other than self is in flight. A pod in flight
// longer than max (by now) is forgotten, and wait then returns
// waitExpired; ctx's end returns waitCancel. The clock is the real one
// (time.Now), whatever clock the extender's assumed pods use: the wait is
// for another goroutine's HTTP request.
func (f *inflight) wait(ctx context.Context, self types.UID, max time.Duration) waitOutcome {
	out := waitNone
	for {
		f.mu.Lock()
		t := time.Now()
		var oldest time.Time
		for uid, at := range f.pods {
			switch {
			case uid == self:
			case t.Sub(at) >= max:
				delete(f.pods, uid)
				out = waitExpired
			case oldest.IsZero() || at.Before(oldest):
				oldest = at
			}
		}
		if oldest.IsZero() {
			f.mu.Unlock()
			return out
		}
		if out == waitNone {
			out = waitBound
		}
		ch := f.changed
		f.mu.Unlock()
		timer := time.NewTimer(max - t.Sub(oldest))
		f.waiters.Add(1)
		select {
		case <-ctx.Done():
			out = waitCancel
		case <-ch:
		case <-timer.C:
		}
		f.waiters.Add(-1)
		timer.Stop()
		if out == waitCancel {
			return out
		}
	}
}
