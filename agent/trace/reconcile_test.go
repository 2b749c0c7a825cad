package trace

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/edgesched/edgesched/agent/trace/tracefmt"
)

// racyView is the pod informer's store as reconcile reads it, with one
// concurrent event slipped in: right after reconcile's first read of it
// returns, race runs once (the test creates a pod then, as a user could at
// any moment).
type racyView struct {
	cache.Indexer
	once sync.Once
	race func()
}

func (v *racyView) after() { v.once.Do(v.race) }

func (v *racyView) List() []any {
	out := v.Indexer.List()
	v.after()
	return out
}

func (v *racyView) GetByKey(key string) (any, bool, error) {
	o, ok, err := v.Indexer.GetByKey(key)
	v.after()
	return o, ok, err
}

func (v *racyView) ByIndex(name, value string) ([]any, error) {
	out, err := v.Indexer.ByIndex(name, value)
	v.after()
	return out, err
}

// TestReconcileRace: after its first list, the recorder reconciles what the
// store has alive with what the cluster shows, recording as deleted the
// pods that went while the agent was down. The race it had: reconcile read
// the informer's store (List) and only then took the recorder's lock to
// walk the pods it had recorded. A pod created in between was added to the
// informer's store after that List, and the pod handler (podSeen, on the
// informer's goroutine) recorded it before reconcile took the lock; so
// reconcile found in its pods one the stale list lacked and recorded that
// live pod as deleted (and forgot it, so its next update recorded a second
// arrival). The fix reads the informer's store while holding the lock: a
// pod the handler recorded before reconcile took the lock was in the
// informer's store before that (the informer updates its store, then
// calls the handlers), and one handled after is not walked.
//
// The test runs the recorder's informers on client-go's fake clientset and
// calls reconcile itself with the informer's store wrapped so that the pod
// "late" is created right after reconcile's first read. When the lock is
// free at that moment (reconcile reads outside it), the test waits for the
// handler to record "late", which is the interleaving above; when reconcile
// holds the lock, the handler waits for it, as it would in the agent.
func TestReconcileRace(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(testPod("old", "", "", ""))
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, func() time.Time { return t0.Add(time.Hour) })
	defer s.Close()
	// before the restart the store recorded "old" (still running) and
	// "gone" (deleted while the agent was down)
	gone := testPod("gone", "", "", "")
	for _, p := range []string{"old", "gone"} {
		ev := tracefmt.Event{Kind: tracefmt.PodArrival, Time: t0, Pod: &tracefmt.Pod{UID: "uid-" + p, Namespace: "shop", Name: p, CPUMilli: 500, MemoryMiB: 100}}
		if _, err := s.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultRecorderConfig()
	cfg.Store, cfg.Client, cfg.Now = s, fakeClient(cs), func() time.Time { return t0.Add(time.Hour) }
	r, err := NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ictx, stopInformers := context.WithCancel(ctx)
	wctx, stopWriter := context.WithCancel(ctx)
	if err := r.load(ictx.Done()); err != nil {
		t.Fatal(err)
	}
	inf, err := r.informers()
	if err != nil {
		t.Fatal(err)
	}
	var informers, writer sync.WaitGroup
	writer.Go(func() { r.writeLoop(wctx) })
	informers.Go(func() { inf.pods.RunWithContext(ictx) })
	informers.Go(func() { inf.nodes.RunWithContext(ictx) })
	defer func() {
		stopInformers()
		informers.Wait()
		stopWriter()
		writer.Wait()
	}()
	// the informers listed and the handlers went through the first list
	// ("old" was known from the store, so nothing was emitted): from here
	// on nothing but reconcile holds the recorder's lock
	if !cache.WaitForCacheSync(ctx.Done(), inf.synced...) {
		t.Fatal("informers did not sync")
	}

	late := testPod("late", "", "", "")
	lockFree := false
	view := &racyView{Indexer: inf.pods.GetIndexer(), race: func() {
		if r.mu.TryLock() {
			r.mu.Unlock()
			lockFree = true
		}
		if _, err := cs.CoreV1().Pods("shop").Create(ctx, late, metav1.CreateOptions{}); err != nil {
			t.Error(err)
			return
		}
		if !lockFree {
			return // reconcile holds the lock: the handler runs after it
		}
		poll(t, 10*time.Second, "the handler to record the late pod", func() (bool, string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			_, ok := r.pods[late.UID]
			return ok, "not recorded"
		})
	}}
	r.reconcile(view, inf.nodes.GetIndexer())
	t.Logf("reconcile read the informer's store with the recorder's lock free: %v", lockFree)

	poll(t, 10*time.Second, "the late pod's arrival and the gone pod's deletion", func() (bool, string) {
		arrived, deleted := map[string]int{}, map[string]int{}
		if err := s.Events(func(_ uint64, e tracefmt.Event) error {
			switch e.Kind {
			case tracefmt.PodArrival:
				arrived[e.Pod.Name]++
			case tracefmt.PodDeletion:
				deleted[e.Pod.Name]++
			}
			return nil
		}); err != nil {
			return false, err.Error()
		}
		msg := fmt.Sprintf("arrivals %v, deletions %v", arrived, deleted)
		if deleted["late"] > 0 || arrived["late"] > 1 {
			t.Fatalf("the live pod late was recorded as deleted or arrived twice: %s", msg)
		}
		// old and gone from the store, late once; gone deleted, no other
		return arrived["old"] == 1 && arrived["gone"] == 1 && arrived["late"] == 1 && deleted["gone"] == 1 && len(deleted) == 1, msg
	})
	live, err := s.LivePods()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range live {
		names[e.Pod.Name] = true
	}
	if len(live) != 2 || !names["old"] || !names["late"] {
		t.Fatalf("live pods %v, want old and late", names)
	}
	r.mu.Lock()
	_, known := r.pods[late.UID]
	_, stale := r.pods[gone.UID]
	r.mu.Unlock()
	if !known || stale {
		t.Fatalf("recorder's pods: late known %v, gone known %v; want true, false", known, stale)
	}
}

// TestRecorderRunAgain: Run called again on the same Recorder starts from
// the store, as a new Recorder would. What the last run held in memory may
// not have reached the store: here a pod it saw as it stopped, whose
// arrival was dropped (emit gives up once Run's context ended). Had the
// second run kept that memory, it would take the pod for recorded and
// never record its arrival.
func TestRecorderRunAgain(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(testPod("web-1", "", "", ""))
	s := openTest(t, filepath.Join(t.TempDir(), "trace.db"), 24*time.Hour, 1000, func() time.Time { return t0 })
	defer s.Close()
	r, stop := startRecorder(t, s, cs, nil)
	poll(t, 10*time.Second, "the first run's list", func() (bool, string) {
		k := countKinds(t, s)
		return r.Synced() && k[tracefmt.PodArrival] == 1, fmt.Sprint(k)
	})
	stop()
	// web-9 was seen as the first run stopped; its arrival never written
	late := testPod("web-9", "", "", "")
	r.mu.Lock()
	r.pods[late.UID] = podState{ref: tracefmt.PodRef{Namespace: late.Namespace, Name: late.Name}}
	r.mu.Unlock()
	if _, err := cs.CoreV1().Pods("shop").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Error(err)
		}
	}()
	poll(t, 10*time.Second, "web-9's arrival in the second run", func() (bool, string) {
		k := countKinds(t, s)
		return r.Synced() && k[tracefmt.PodArrival] == 2 && k[tracefmt.PodDeletion] == 0, fmt.Sprint(k)
	})
}
