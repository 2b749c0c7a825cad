package edgeplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
)

// recordedEvent is one event of eventLog.
type recordedEvent struct {
	namespace, name, kind string // the regarding object
	eventtype, reason     string
	note                  string
}

// eventLog is an events.EventRecorderLogger that keeps what it is given
// (events.FakeRecorder drops the regarding object's name).
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	e := recordedEvent{eventtype: eventtype, reason: reason, note: fmt.Sprintf(note, args...)}
	if cm, ok := regarding.(*v1.ConfigMap); ok {
		e.namespace, e.name, e.kind = cm.Namespace, cm.Name, "ConfigMap"
	}
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) WithLogger(klog.Logger) events.EventRecorderLogger { return l }

func (l *eventLog) list(reason string) []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recordedEvent
	for _, e := range l.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// cmHandle is a framework handle with a (fake) client and an event log;
// every other method panics (nil embedded interface).
type cmHandle struct {
	fwk.Handle
	cs  kubernetes.Interface
	rec *eventLog
}

func (h *cmHandle) ClientSet() kubernetes.Interface           { return h.cs }
func (h *cmHandle) EventRecorder() events.EventRecorderLogger { return h.rec }

const (
	cmNamespace = "edge-system"
	cmName      = "edgesched-model"
)

func modelConfigMap(key string, raw []byte) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmNamespace, Name: cmName}, BinaryData: map[string][]byte{key: raw}}
}

func counterValue(t testing.TB, reason string) float64 {
	t.Helper()
	return plugintest.Counter(t, "edgesched_plugin_model_refusals_total", map[string]string{"reason": reason})
}

func swapsValue(t testing.TB) float64 {
	t.Helper()
	return plugintest.Counter(t, "edgesched_plugin_model_swaps_total", nil)
}

// eventually polls cond for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConfigMapModelSource(t *testing.T) {
	dir := t.TempDir()
	s, other := testSigner(t, 1), testSigner(t, 99)
	_, pub, err := quant.WriteKeyPair(dir, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	// v1 exists before the plugin starts; another ConfigMap in the same
	// namespace is never looked at (the fake clientset ignores the field
	// selector, so the source's own name check is what is tested here).
	client := fake.NewClientset(
		modelConfigMap(DefaultModelConfigMapKey, encodeVersion(t, s, 1)),
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmNamespace, Name: "unrelated"}, BinaryData: map[string][]byte{DefaultModelConfigMapKey: []byte("junk")}},
	)
	rec := &eventLog{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	swaps0 := swapsValue(t)
	raw := fmt.Sprintf(`{"modelConfigMap":%q,"modelKeys":[%q]}`, cmNamespace+"/"+cmName, pub)
	pl, err := New(ctx, &runtime.Unknown{Raw: []byte(raw), ContentType: runtime.ContentTypeJSON}, &cmHandle{cs: client, rec: rec})
	if err != nil {
		t.Fatal(err)
	}
	p := pl.(*EdgePolicy)
	if p.args.ModelConfigMapKey != DefaultModelConfigMapKey {
		t.Fatalf("modelConfigMapKey defaulted to %q", p.args.ModelConfigMapKey)
	}
	version := func() uint64 {
		if m := p.Models().Current(); m != nil {
			return m.Header.Version
		}
		return 0
	}
	// New waits for the first list: v1 is in before it returns.
	if v := version(); v != 1 {
		t.Fatalf("model version %d after New, want 1 from the ConfigMap", v)
	}
	// Its event is held (kube-scheduler's broadcaster is not recording
	// while plugins are built) and raised startupEventDelay later.
	if n := len(rec.list(sources.EventModelInstalled)); n != 0 {
		t.Fatalf("%d ModelInstalled events raised during New, want them held", n)
	}
	// the first scheduling cycle raises them (synchronously)
	p.PreFilter(ctx, framework.NewCycleState(), k8sPod(sim.PodSpec{Name: "first", CPU: 100, Memory: 100}), nil)
	if n := len(rec.list(sources.EventModelInstalled)); n != 1 {
		t.Fatalf("%d ModelInstalled events after the first cycle, want the held one", n)
	}
	if e := rec.list(sources.EventModelInstalled)[0]; e.kind != "ConfigMap" || e.namespace != cmNamespace || e.name != cmName || e.eventtype != v1.EventTypeNormal {
		t.Fatalf("install event %+v, want a Normal event on %s/%s", e, cmNamespace, cmName)
	}

	cms := client.CoreV1().ConfigMaps(cmNamespace)
	update := func(cm *v1.ConfigMap) {
		t.Helper()
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// v2 swaps in.
	update(modelConfigMap(DefaultModelConfigMapKey, encodeVersion(t, s, 2)))
	eventually(t, "v2 installed", func() bool { return version() == 2 })
	if got := swapsValue(t) - swaps0; got != 2 {
		t.Errorf("model_swaps_total grew by %v, want 2 (v1, v2)", got)
	}
	v2 := p.Models().Current()

	// Refusals: each keeps v2, counts its reason and emits ModelRefused on
	// the ConfigMap naming the reason.
	tampered := encodeVersion(t, s, 3)
	tampered[len(tampered)-100] ^= 1
	for i, c := range []struct {
		name   string
		cm     *v1.ConfigMap
		reason string
	}{
		{"older version", modelConfigMap(DefaultModelConfigMapKey, encodeVersion(t, s, 1)), sources.RefuseRollback},
		{"untrusted key", modelConfigMap(DefaultModelConfigMapKey, encodeVersion(t, other, 3)), sources.RefuseSignature},
		{"tampered", modelConfigMap(DefaultModelConfigMapKey, tampered), sources.RefuseSignature},
		{"garbage", modelConfigMap(DefaultModelConfigMapKey, []byte("not a model")), sources.RefuseArtifact},
		{"missing key", modelConfigMap("other.esa", encodeVersion(t, s, 3)), sources.RefuseRead},
	} {
		before := counterValue(t, c.reason)
		update(c.cm)
		eventually(t, c.name+" refused", func() bool { return len(rec.list(sources.EventModelRefused)) == i+1 })
		e := rec.list(sources.EventModelRefused)[i]
		if e.kind != "ConfigMap" || e.namespace != cmNamespace || e.name != cmName || e.eventtype != v1.EventTypeWarning ||
			!strings.Contains(e.note, "reason "+c.reason) || !strings.Contains(e.note, "keeping model version 2") {
			t.Errorf("%s: event %+v, want a Warning on %s/%s naming reason %s and the kept v2", c.name, e, cmNamespace, cmName, c.reason)
		}
		if got := counterValue(t, c.reason); got != before+1 {
			t.Errorf("%s: model_refusals_total{reason=%q} %v -> %v, want +1", c.name, c.reason, before, got)
		}
		if p.Models().Current() != v2 {
			t.Fatalf("%s: the last-known-good v2 was replaced", c.name)
		}
	}

	// An update that does not change the model key (a label) is neither
	// re-verified nor re-refused.
	refusedBefore := len(rec.list(sources.EventModelRefused))
	cm := modelConfigMap("other.esa", encodeVersion(t, s, 3))
	cm.Labels = map[string]string{"touched": "yes"}
	update(cm)
	// Deleting the ConfigMap keeps v2; a later one with v3 installs (the
	// watch goes on).
	if err := cms.Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, modelConfigMap(DefaultModelConfigMapKey, encodeVersion(t, s, 3)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "v3 installed after delete and re-create", func() bool { return version() == 3 })
	if n := len(rec.list(sources.EventModelRefused)); n != refusedBefore {
		t.Errorf("%d refusal events after the label-only update and the delete, want %d", n, refusedBefore)
	}
	// The event follows the swap: wait for it, then check there is no
	// other.
	eventually(t, "ModelInstalled events for v1, v2, v3", func() bool { return len(rec.list(sources.EventModelInstalled)) >= 3 })
	if n := len(rec.list(sources.EventModelInstalled)); n != 3 {
		t.Errorf("%d ModelInstalled events, want 3 (v1, v2, v3)", n)
	}
}

// TestConfigMapDeleteKeepsModel: after the ConfigMap is deleted the model
// stays, and the watch's goroutines all end with the context.
func TestConfigMapDeleteKeepsModel(t *testing.T) {
	s := testSigner(t, 1)
	store := sources.NewModelStore(testKeyring(t, s))
	client := fake.NewClientset(modelConfigMap("m", encodeVersion(t, s, 7)))
	ctx, cancel := context.WithCancel(t.Context())
	src, wait := sources.StartModelSource(ctx, client, nil, store, cmNamespace, cmName, "m")
	if m := store.Current(); m == nil || m.Header.Version != 7 {
		t.Fatalf("model %+v after start, want v7", m)
	}
	good := store.Current()
	if err := client.CoreV1().ConfigMaps(cmNamespace).Delete(ctx, cmName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// the informer sees the deletion without touching the model
	eventually(t, "the source to see the deletion", func() bool { return src.Deletions() == 1 })
	if store.Current() != good {
		t.Fatal("deleting the ConfigMap replaced the model")
	}
	cancel()
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the ConfigMap watch did not stop with its context")
	}
}

// TestConfigMapNotThereYet: a missing ConfigMap at start is no refusal;
// creating it later installs the model.
func TestConfigMapNotThereYet(t *testing.T) {
	s := testSigner(t, 1)
	store := sources.NewModelStore(testKeyring(t, s))
	client := fake.NewClientset()
	before := counterValue(t, sources.RefuseRead)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, wait := sources.StartModelSource(ctx, client, nil, store, cmNamespace, cmName, DefaultModelConfigMapKey)
	defer wait()
	defer cancel()
	if store.Current() != nil || counterValue(t, sources.RefuseRead) != before {
		t.Fatal("a missing ConfigMap installed or refused something")
	}
	if _, err := client.CoreV1().ConfigMaps(cmNamespace).Create(ctx, modelConfigMap(DefaultModelConfigMapKey, encodeVersion(t, s, 1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "model installed from the new ConfigMap", func() bool { return store.Current() != nil })
}

func TestConfigMapArgs(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string // substring of the error; "" means valid
	}{
		{`{"modelConfigMap":"ns/name","modelKeys":["k"]}`, ""},
		{`{"modelConfigMap":"ns/name","modelConfigMapKey":"policy.esa","modelKeys":["k"]}`, ""},
		{`{"modelKeys":["k"]}`, "modelPath (a file) or modelConfigMap"},
		{`{"modelPath":"m","modelConfigMap":"ns/name","modelKeys":["k"]}`, "mutually exclusive"},
		{`{"modelPath":"m","modelConfigMapKey":"model.esa","modelKeys":["k"]}`, "only meaningful with modelConfigMap"},
		{`{"modelConfigMap":"name","modelKeys":["k"]}`, "must be namespace/name"},
		{`{"modelConfigMap":"a/b/c","modelKeys":["k"]}`, "must be namespace/name"},
		{`{"modelConfigMap":"/name","modelKeys":["k"]}`, "namespace"},
		{`{"modelConfigMap":"Kube_System/name","modelKeys":["k"]}`, "namespace"},
		{`{"modelConfigMap":"ns/","modelKeys":["k"]}`, "name"},
		{`{"modelConfigMap":"ns/Bad_Name","modelKeys":["k"]}`, "name"},
		{`{"modelConfigMap":"ns/name","modelConfigMapKey":"a/b","modelKeys":["k"]}`, "modelConfigMapKey"},
		{`{"modelConfigMap":"ns/name"}`, "modelKeys: Required value"},
		{`{"modelConfigMap":"ns/name","dependenciesConfigMap":"ns/deps","topologyConfigMap":"ns/topo","modelKeys":["k"]}`, ""},
		{`{"modelConfigMap":"ns/name","dependenciesConfigMap":"deps","modelKeys":["k"]}`, `dependenciesConfigMap: Invalid value: "deps": must be namespace/name`},
		{`{"modelConfigMap":"ns/name","topologyConfigMap":"topo","modelKeys":["k"]}`, `topologyConfigMap: Invalid value: "topo": must be namespace/name`},
		{`{"modelConfigMap":"ns/name","topologyConfigMap":"ns/Bad_Name","modelKeys":["k"]}`, "topologyConfigMap"},
	} {
		a, err := DecodeArgs(&runtime.Unknown{Raw: []byte(c.raw), ContentType: runtime.ContentTypeJSON})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("DecodeArgs(%s) = %v, want valid", c.raw, err)
		case c.want == "" && a.ModelConfigMapKey == "":
			t.Errorf("DecodeArgs(%s): modelConfigMapKey not defaulted", c.raw)
		case c.want != "" && (!errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("DecodeArgs(%s) = %v, want ErrArgs mentioning %q", c.raw, err, c.want)
		}
	}
	// the file source does not get a ConfigMap key by default
	a, err := DecodeArgs(&runtime.Unknown{Raw: []byte(`{"modelPath":"m","modelKeys":["k"]}`)})
	if err != nil || a.ModelConfigMapKey != "" {
		t.Fatalf("file args: %+v %v", a, err)
	}
	// a ConfigMap source needs the scheduler's client
	if _, err := New(t.Context(), &runtime.Unknown{Raw: []byte(`{"modelConfigMap":"ns/name","modelKeys":["k"]}`)}, nil); err == nil {
		t.Fatal("New without a handle accepted modelConfigMap")
	}
}
