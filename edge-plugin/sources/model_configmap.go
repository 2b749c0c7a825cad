package sources

import (
	"bytes"
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

	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
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
// stays. A refusal that may pass with the same bytes
// (RefusalError.Transient: the state file locked past its open timeout, a
// full disk) is retried with capped, jittered backoff (modelRetryMin to
// modelRetryMax) from the informer's cache, as no update of the ConfigMap
// may come; each attempt is counted, the first one logged as an error and
// raised as an Event, the others logged at verbosity 2. Deleting the
// ConfigMap keeps the model in use (logged). Everything runs on the
// informer's goroutines and the retry goroutine: scheduling never waits.

// Event reasons on the model ConfigMap.
const (
	EventModelRefused   = "ModelRefused"
	EventModelInstalled = "ModelInstalled"
)

// eventAction is the events.k8s.io action of the model events.
const eventAction = "LoadModel"

// modelRetryMin and modelRetryMax pace the retries of a transient refusal
// (full jitter, doubling).
const (
	modelRetryMin = time.Second
	modelRetryMax = 30 * time.Second
)

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
	// failing holds the bytes last refused for a transient reason, until
	// bytes settle (installed or refused for good); retry asks the retry
	// goroutine to apply the ConfigMap again.
	failing []byte
	retry   chan struct{}

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
		retry:  make(chan struct{}, 1),
		logger: klog.FromContext(ctx).WithValues("plugin", Owner, "configMap", namespace+"/"+name, "key", key)}
	s.holding.Store(true)
	w := watchConfigMap(ctx, client, namespace, name, s.apply, s.deleted, s.logger)
	var wg sync.WaitGroup
	wg.Go(w.wait)
	wg.Go(func() { s.retryLoop(ctx, w.get) })
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
func (s *ModelSource) apply(obj any) { s.applyFrom(obj, false) }

// applyFrom is apply; retry is the retry goroutine's call. Bytes refused
// for a transient reason are left to the retry goroutine: another update
// of the ConfigMap carrying them (or New's call after the informer's) does
// not try them at once, which would block its goroutine for as long again
// (the state file's open timeout).
func (s *ModelSource) applyFrom(obj any, retry bool) {
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
	pending := err == nil && !retry && s.failing != nil && bytes.Equal(raw, s.failing)
	s.mu.Unlock()
	if again || pending {
		return
	}
	var installed bool
	if err != nil {
		err = s.store.refuse(RefuseRead, err)
	} else {
		installed, err = s.store.installChanged(raw)
	}
	logger := s.logger.WithValues("resourceVersion", cm.ResourceVersion)
	// A transient refusal of raw is retried; its repeats are logged
	// quietly and raise no Event.
	repeat := false
	s.mu.Lock()
	if raw != nil && transient(err) {
		repeat = s.failing != nil && bytes.Equal(raw, s.failing)
		s.failing = raw
		select {
		case s.retry <- struct{}{}:
		default:
		}
	} else {
		s.failing = nil
	}
	s.mu.Unlock()
	switch {
	case repeat:
		logger.V(2).Info("Model still refused; retrying", "err", err)
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
		logger.Info("Installed model", "version", h.Version, "modelID", quant.ShortID(h.ModelID), "int8Kernel", int8net.Kernel())
		s.event(cm, v1.EventTypeNormal, EventModelInstalled, "%s installed model version %d (%s) from key %s",
			Owner, h.Version, quant.ShortID(h.ModelID), s.key)
	}
}

// retryLoop applies the ConfigMap again (as the informer's cache holds
// it) after each transient refusal, with capped, jittered backoff, until
// ctx ends. A ConfigMap gone meanwhile is not retried (a new one is the
// informer's add, tried at once).
func (s *ModelSource) retryLoop(ctx context.Context, get func() (*v1.ConfigMap, error)) {
	b := backoff.New(modelRetryMin, modelRetryMax, 0x5e7)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.retry:
		}
		if !b.Sleep(ctx) {
			return
		}
		cm, err := get()
		if err != nil {
			s.mu.Lock()
			s.failing = nil // nothing to retry; bytes the informer brings again are tried at once
			s.mu.Unlock()
			continue
		}
		s.applyFrom(cm, true)
		s.mu.Lock()
		settled := s.failing == nil
		s.mu.Unlock()
		if settled {
			b.Reset()
		}
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
