package sources

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// FeedTarget is what a Feed feeds (the dependency graph, the
// site topology). Its methods are called one at a time.
type FeedTarget interface {
	// install decodes raw and puts it in use; changed reports whether
	// what is in use changed. On an error nothing changes.
	Install(raw []byte) (changed bool, err error)
	// clear removes the value in use, reporting whether there was one.
	Clear() bool
	// inUse describes what is in use, as log key/values.
	InUse() []any
}

// SideTarget is a FeedTarget that also reads a second, optional key of
// the same ConfigMap (the dependency graph's embeddings), so the two are
// installed together.
type SideTarget interface {
	FeedTarget
	// InstallWith is Install with the side key's value (nil when the
	// ConfigMap does not have it).
	InstallWith(raw, side []byte) (changed bool, err error)
}

// newFeedUpdates is a feed's counter of ConfigMap changes, by result.
func newFeedUpdates(name, what string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      MetricsSubsystem,
		Name:           name,
		Help:           what + " ConfigMap changes by result: applied, refused (malformed; the last good one stays), cleared (ConfigMap deleted or key removed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
}

// Feed watches one key of one ConfigMap and feeds it into a
// FeedTarget: installed on every change, refused when it does not decode
// (counted, logged once per resourceVersion; the last good value stays),
// cleared when the key or the ConfigMap goes.
type Feed struct {
	what, without       string // "Dependency graph", "dependency features are 0"
	key                 string
	side                string // a second, optional key (target is a SideTarget)
	target              FeedTarget
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
func (f *Feed) start(ctx context.Context, client kubernetes.Interface) func() {
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
func (f *Feed) apply(obj any) {
	cm, ok := obj.(*v1.ConfigMap)
	if !ok || cm.Namespace != f.namespace || cm.Name != f.name {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	raw, err := configMapBytes(cm, f.key)
	if err != nil {
		if f.target.Clear() {
			f.updates.WithLabelValues("cleared").Inc()
			f.logger.Info("ConfigMap has no "+f.key+" key: "+f.without, "what", f.what)
		}
		return
	}
	var changed bool
	if st, ok := f.target.(SideTarget); ok && f.side != "" {
		side, _ := configMapBytes(cm, f.side) // nil without it
		changed, err = st.InstallWith(raw, side)
	} else {
		changed, err = f.target.Install(raw)
	}
	if err != nil {
		if cm.ResourceVersion != f.lastRefusedResource {
			f.lastRefusedResource = cm.ResourceVersion
			f.updates.WithLabelValues("refused").Inc()
			f.logger.Error(err, f.what+" refused: keeping the last good one", append([]any{"resourceVersion", cm.ResourceVersion}, f.target.InUse()...)...)
		}
		return
	}
	if changed {
		f.updates.WithLabelValues("applied").Inc()
		f.logger.V(2).Info(f.what+" applied", append([]any{"resourceVersion", cm.ResourceVersion}, f.target.InUse()...)...)
	}
}

// deleted clears the value: the site no longer publishes one.
func (f *Feed) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cm, ok := obj.(*v1.ConfigMap); ok && (cm.Namespace != f.namespace || cm.Name != f.name) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.target.Clear() {
		f.updates.WithLabelValues("cleared").Inc()
		f.logger.Info(f.what+" ConfigMap deleted: "+f.without, "what", f.what)
	}
}

// configMapSyncTimeout bounds how long New waits for the informer's first
// list (so a model present at start is installed before the first
// scheduling cycle); a slower or failing list is logged and the watch goes
// on in the background.
const configMapSyncTimeout = 10 * time.Second

// configMapBytes returns key of cm: binaryData (what kubectl create
// configmap --from-file makes of a binary file), else data (the API
// refuses a key in both).
func configMapBytes(cm *v1.ConfigMap, key string) ([]byte, error) {
	if b, ok := cm.BinaryData[key]; ok {
		return b, nil
	}
	if d, ok := cm.Data[key]; ok {
		return []byte(d), nil
	}
	return nil, fmt.Errorf("ConfigMap %s/%s has no key %q in binaryData or data", cm.Namespace, cm.Name, key)
}

// configMapWatch is a namespace-scoped informer on one ConfigMap: its
// list and watch carry the field selector metadata.name=NAME, so the
// scheduler needs get/list/watch on that ConfigMap only.
type configMapWatch struct {
	synced func() bool                   // the first list is in
	get    func() (*v1.ConfigMap, error) // from the informer's cache
	wait   func()                        // blocks until the informer stopped after ctx ended
}

// watchConfigMap starts the informer of namespace/name until ctx ends,
// calling apply on adds and updates and deleted on deletions (on the
// informer's goroutine).
func watchConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name string, apply, deleted func(any), logger klog.Logger) configMapWatch {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
		}))
	cms := factory.Core().V1().ConfigMaps()
	inf := cms.Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: deleted,
	}); err != nil {
		// only fails on a stopped informer, which this one is not yet
		logger.Error(err, "Cannot watch the ConfigMap")
	}
	factory.Start(ctx.Done())
	return configMapWatch{
		synced: inf.HasSynced,
		get:    func() (*v1.ConfigMap, error) { return cms.Lister().ConfigMaps(namespace).Get(name) },
		wait: func() {
			<-ctx.Done()
			factory.Shutdown() // waits for the informer's goroutines
		},
	}
}
