package edgeplugin

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// feedTarget is what a configMapFeed feeds (the dependency graph, the
// site topology). Its methods are called one at a time.
type feedTarget interface {
	// install decodes raw and puts it in use; changed reports whether
	// what is in use changed. On an error nothing changes.
	install(raw []byte) (changed bool, err error)
	// clear removes the value in use, reporting whether there was one.
	clear() bool
	// inUse describes what is in use, as log key/values.
	inUse() []any
}

// newFeedUpdates is a feed's counter of ConfigMap changes, by result.
func newFeedUpdates(name, what string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           name,
		Help:           what + " ConfigMap changes by result: applied, refused (malformed; the last good one stays), cleared (ConfigMap deleted or key removed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
}

// configMapFeed watches one key of one ConfigMap and feeds it into a
// feedTarget: installed on every change, refused when it does not decode
// (counted, logged once per resourceVersion; the last good value stays),
// cleared when the key or the ConfigMap goes.
type configMapFeed struct {
	what, without       string // "Dependency graph", "dependency features are 0"
	key                 string
	target              feedTarget
	updates             *metrics.CounterVec // by result: applied, refused, cleared
	namespace, name     string
	logger              klog.Logger
	mu                  sync.Mutex // serialises apply and deleted
	lastRefusedResource string     // resourceVersion last refused (logged once)
}

// start watches the ConfigMap until ctx ends, waiting (at most
// configMapSyncTimeout) for the first list so a value present at start is
// in use before the first cycle. The returned function blocks until the
// watch has stopped after ctx ended.
func (f *configMapFeed) start(ctx context.Context, client kubernetes.Interface) func() {
	w := watchConfigMap(ctx, client, f.namespace, f.name, f.apply, f.deleted, f.logger)
	sctx, cancel := context.WithTimeout(ctx, configMapSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), w.synced) {
		f.logger.Error(sctx.Err(), "ConfigMap not listed yet (RBAC: get/list/watch on it?); watching in the background", "what", f.what, "until then", f.without)
		return w.wait
	}
	if cm, err := w.get(); err == nil {
		f.apply(cm)
	} else {
		f.logger.Info("No ConfigMap yet", "what", f.what, "until one is created", f.without)
	}
	return w.wait
}

// apply decodes the ConfigMap's value and installs it; a malformed one is
// refused and the last good value stays.
func (f *configMapFeed) apply(obj any) {
	cm, ok := obj.(*v1.ConfigMap)
	if !ok || cm.Namespace != f.namespace || cm.Name != f.name {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	raw, err := configMapBytes(cm, f.key)
	if err != nil {
		if f.target.clear() {
			f.updates.WithLabelValues("cleared").Inc()
			f.logger.Info("ConfigMap has no "+f.key+" key: "+f.without, "what", f.what)
		}
		return
	}
	changed, err := f.target.install(raw)
	if err != nil {
		if cm.ResourceVersion != f.lastRefusedResource {
			f.lastRefusedResource = cm.ResourceVersion
			f.updates.WithLabelValues("refused").Inc()
			f.logger.Error(err, f.what+" refused: keeping the last good one", append([]any{"resourceVersion", cm.ResourceVersion}, f.target.inUse()...)...)
		}
		return
	}
	if changed {
		f.updates.WithLabelValues("applied").Inc()
		f.logger.V(2).Info(f.what+" applied", append([]any{"resourceVersion", cm.ResourceVersion}, f.target.inUse()...)...)
	}
}

// deleted clears the value: the site no longer publishes one.
func (f *configMapFeed) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cm, ok := obj.(*v1.ConfigMap); ok && (cm.Namespace != f.namespace || cm.Name != f.name) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.target.clear() {
		f.updates.WithLabelValues("cleared").Inc()
		f.logger.Info(f.what+" ConfigMap deleted: "+f.without, "what", f.what)
	}
}
