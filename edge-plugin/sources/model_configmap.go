package sources

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/edgesched/edgesched/quant"
)

// The ConfigMap model source: one ConfigMap (namespace/name from
// modelConfigMap) watched by a namespace-scoped informer whose list and
// watch carry the field selector metadata.name=NAME, so the scheduler
// needs get/list/watch on that ConfigMap only. Every add and update goes
// through the file source's verify-and-swap path
// (ModelStore.installChanged): signature against the keyring, artifact
// and int8 checks, version monotonicity, one atomic store. A refusal is
// counted in model_refusals_total{reason} and also reported as a Warning
// Event (reason ModelRefused) on the ConfigMap; the last-known-good model
// stays. Deleting the ConfigMap keeps the model in use (logged).
// Everything runs on the informer's goroutines: scheduling never waits.

// Event reasons on the model ConfigMap.
const (
	EventModelRefused   = "ModelRefused"
	EventModelInstalled = "ModelInstalled"
)

// eventAction is the events.k8s.io action of the model events.
const eventAction = "LoadModel"

// ModelSource feeds one ConfigMap's model key into a ModelStore.
type ModelSource struct {
	store     *ModelStore
	recorder  events.EventRecorder // nil: no events (metric and log only)
	namespace string
	name      string
	key       string
	logger    klog.Logger

	applyMu sync.Mutex // serialises apply
	mu      sync.Mutex
	missing bool // the last ConfigMap seen had no model key

	// Events raised while New runs are held and raised again later:
	// kube-scheduler builds its plugins before its event broadcaster starts
	// recording, and events recorded before that are dropped.
	evMu    sync.Mutex
	hold    bool
	held    []func()
	holding atomic.Bool // hold, readable without evMu (the scheduling path)

	deletions atomic.Int64 // ConfigMap deletions seen (tests)
}

// startupEventDelay is how long after New the events held during New are
// raised at the latest: kube-scheduler starts recording events at the very
// beginning of its Run, right after building the plugins, so the first
// scheduling cycle (EdgePolicy's PreFilter) raises them, and this timer
// covers a scheduler with nothing to schedule.
const startupEventDelay = 3 * time.Second

// StartModelSource starts watching namespace/name until ctx ends and
// waits (at most configMapSyncTimeout) for the first list, installing the
// model found there. The returned function blocks until every goroutine of
// the watch has stopped after ctx ended (tests use it).
func StartModelSource(ctx context.Context, client kubernetes.Interface, recorder events.EventRecorder,
	store *ModelStore, namespace, name, key string) (s *ModelSource, wait func()) {
	s = &ModelSource{store: store, recorder: recorder, namespace: namespace, name: name, key: key, hold: true,
		logger: klog.FromContext(ctx).WithValues("plugin", Owner, "configMap", namespace+"/"+name, "key", key)}
	s.holding.Store(true)
	w := watchConfigMap(ctx, client, namespace, name, s.apply, s.deleted, s.logger)
	var wg sync.WaitGroup
	wg.Go(w.wait)
	wg.Go(func() {
		t := time.NewTimer(startupEventDelay)
		defer t.Stop()
		select {
		case <-t.C:
			s.ReleaseEvents()
		case <-ctx.Done():
		}
	})

	sctx, cancel := context.WithTimeout(ctx, configMapSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), w.synced) {
		s.logger.Error(sctx.Err(), "The model ConfigMap is not listed yet (RBAC: get/list/watch on it?); watching in the background, scoring neutrally until a model loads")
		return s, wg.Wait
	}
	// The handler delivers the add asynchronously; applying the listed
	// object here installs it before New returns (the handler's later call
	// with the same bytes is a no-op).
	cm, err := w.get()
	if err != nil {
		s.logger.Info("No model ConfigMap yet: scoring neutrally until one is created")
		return s, wg.Wait
	}
	s.apply(cm)
	return s, wg.Wait
}

// apply verifies and installs the ConfigMap's model (informer callback,
// and New's own call on the listed object). Calls run one at a time: a
// call that finds the bytes it was given already being installed must not
// return before that install has finished (New relies on it).
func (s *ModelSource) apply(obj any) {
	cm, ok := obj.(*v1.ConfigMap)
	if !ok || cm.Namespace != s.namespace || cm.Name != s.name {
		return
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	raw, err := configMapBytes(cm, s.key)
	// A key still missing is refused once, not on every other update.
	s.mu.Lock()
	again := err != nil && s.missing
	s.missing = err != nil
	s.mu.Unlock()
	if again {
		return
	}
	var installed bool
	if err != nil {
		err = s.store.refuse(RefuseRead, err)
	} else {
		installed, err = s.store.installChanged(raw)
	}
	logger := s.logger.WithValues("resourceVersion", cm.ResourceVersion)
	switch {
	case err != nil:
		reason, detail := "unknown", err
		var re *RefusalError
		if errors.As(err, &re) {
			reason, detail = re.Reason, re.Err
		}
		keep := "no model loaded: scoring neutrally"
		if m := s.store.Current(); m != nil {
			keep = fmt.Sprintf("keeping model version %d (%s)", m.Header.Version, quant.ShortID(m.Header.ModelID))
		}
		logger.Error(err, "Model refused", "reason", reason, "kept", keep)
		s.event(cm, v1.EventTypeWarning, EventModelRefused, "%s refused the model in key %s (reason %s): %v; %s",
			Owner, s.key, reason, trimErr(detail), keep)
	case installed:
		h := s.store.Current().Header
		logger.Info("Installed model", "version", h.Version, "modelID", quant.ShortID(h.ModelID), "int8Kernel", quant.Kernel())
		s.event(cm, v1.EventTypeNormal, EventModelInstalled, "%s installed model version %d (%s) from key %s",
			Owner, h.Version, quant.ShortID(h.ModelID), s.key)
	}
}

// deleted keeps the current model: a deleted ConfigMap is no new model.
func (s *ModelSource) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cm, ok := obj.(*v1.ConfigMap); ok && (cm.Namespace != s.namespace || cm.Name != s.name) {
		return
	}
	defer s.deletions.Add(1)
	if m := s.store.Current(); m != nil {
		s.logger.Info("Model ConfigMap deleted: keeping the model in use", "version", m.Header.Version, "modelID", quant.ShortID(m.Header.ModelID))
	} else {
		s.logger.Info("Model ConfigMap deleted: no model loaded, scoring neutrally")
	}
}

func (s *ModelSource) event(cm *v1.ConfigMap, eventtype, reason, note string, args ...any) {
	if s.recorder == nil {
		return
	}
	emit := func() { s.recorder.Eventf(cm, nil, eventtype, reason, eventAction, note, args...) }
	s.evMu.Lock()
	defer s.evMu.Unlock()
	if s.hold {
		s.held = append(s.held, emit)
		return
	}
	emit()
}

// ReleaseEvents raises the events held since New, in order, and stops
// holding. Safe to call many times, from any goroutine.
func (s *ModelSource) ReleaseEvents() {
	if s == nil || !s.holding.Load() {
		return
	}
	s.evMu.Lock()
	defer s.evMu.Unlock()
	s.holding.Store(false)
	for _, emit := range s.held {
		emit()
	}
	s.hold, s.held = false, nil
}

// trimErr keeps an event's note well under the API's 1 kB limit.
func trimErr(err error) string {
	const max = 600
	m := err.Error()
	if len(m) > max {
		m = m[:max] + "..."
	}
	return m
}

// Deletions counts the ConfigMap deletions the source has seen.
func (s *ModelSource) Deletions() int64 { return s.deletions.Load() }
