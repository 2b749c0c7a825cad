//go:build unix

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	edgeplugin "github.com/edgesched/edgesched/edge-plugin"
	"github.com/edgesched/edgesched/edge-plugin/sources"
	"github.com/edgesched/edgesched/kubefmt"
)

// This file runs edge-scheduler with EdgePolicy's ConfigMap model source
// (modelConfigMap) against the real control plane, as the shipped RBAC's
// ServiceAccount: the model arrives in a ConfigMap created after the
// scheduler started, a newer one in an update is hot-swapped in, and one
// signed by an untrusted key is refused (metric and a ModelRefused Event
// on the ConfigMap) while scheduling goes on with the previous model.

const (
	// cmModelNamespace/cmModelName is the ConfigMap the shipped RBAC
	// (deploy/edge-scheduler/rbac.yaml) lets edge-scheduler watch.
	cmModelNamespace = kubefmt.DefaultNamespace
	cmModelName      = "edgesched-model"
	cmModelNodes     = 12
)

// configMapSchedulerConfig is deploySchedulerConfig's file with the model
// source switched from modelPath to modelConfigMap (the args decoded and
// validated as the plugin will).
func configMapSchedulerConfig(t testing.TB, dir, kubeconfig, keyDir string) string {
	t.Helper()
	path, _ := deploySchedulerConfig(t, dir, kubeconfig, filepath.Join(dir, "unused.esa"), keyDir)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	for _, pc := range cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"].([]any) {
		if m := pc.(map[string]any); m["name"] == edgeplugin.Name {
			args = m["args"].(map[string]any)
		}
	}
	delete(args, "modelPath")
	delete(args, "reloadInterval")
	args["modelConfigMap"] = cmModelNamespace + "/" + cmModelName
	ab, err := yaml.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	a, err := edgeplugin.DecodeArgs(&runtime.Unknown{Raw: ab, ContentType: runtime.ContentTypeYAML})
	if err != nil {
		t.Fatal(err)
	}
	if a.ModelConfigMapKey != edgeplugin.DefaultModelConfigMapKey {
		t.Fatalf("modelConfigMapKey %q", a.ModelConfigMapKey)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// modelConfigMapObject is the model ConfigMap as `kubectl create configmap
// edgesched-model --from-file=model.esa=...` makes it (binaryData).
func modelConfigMapObject(raw []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: cmModelNamespace, Name: cmModelName},
		BinaryData: map[string][]byte{edgeplugin.DefaultModelConfigMapKey: raw},
	}
}

// modelEvents lists the events with reason on the model ConfigMap.
func (r *edgeRun) modelEvents(ctx context.Context, reason string) []corev1.Event {
	r.t.Helper()
	sel := fields.Set{"involvedObject.kind": "ConfigMap", "involvedObject.name": cmModelName, "reason": reason}.AsSelector().String()
	list, err := r.cp.Client.CoreV1().Events(cmModelNamespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		r.t.Fatal(err)
	}
	return list.Items
}

// waitModelEvents polls until at least n events with reason are on the
// model ConfigMap (events are written asynchronously).
func (r *edgeRun) waitModelEvents(ctx context.Context, reason string, n int) []corev1.Event {
	r.t.Helper()
	var ev []corev1.Event
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ev = r.modelEvents(ctx, reason)
		return len(ev) >= n, nil
	})
	if err != nil {
		r.t.Fatalf("waiting for %d %s events on %s/%s: %v (got %d)", n, reason, cmModelNamespace, cmModelName, err, len(ev))
	}
	return ev
}

// TestEdgeSchedulerConfigMapModel runs edge-scheduler with the model in a
// ConfigMap: v1 created after the start, v2 swapped in by an update, an
// untrusted v3 refused with a metric and an Event, v2 kept.
func TestEdgeSchedulerConfigMapModel(t *testing.T) {
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	oc := startOpenbCluster(ctx, t, cmModelNodes, quantizeShipped)
	cp, nodeList, arts := oc.cp, oc.nodes, oc.art

	// The trusted public key alone in its directory; no model file.
	dir := t.TempDir()
	trusted, untrusted := e2eSigner(t, 1), e2eSigner(t, 101)
	keyDir := trustedKeyDir(t, dir, trusted)

	// The shipped RBAC (its model-configmap ClusterRole and edgesched-system
	// RoleBinding grant get/list/watch on the ConfigMap and events) and
	// the shipped config with modelConfigMap instead of modelPath.
	kubeconfig := applyDeployRBAC(ctx, t, cp, dir)
	cfgPath := configMapSchedulerConfig(t, dir, kubeconfig, keyDir)
	sched := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], ConfigFile: cfgPath,
		Args: []string{"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig}})
	ref, err := newSimReference(nodeList, oc.target)
	if err != nil {
		t.Fatal(err)
	}
	r := &edgeRun{t: t, cp: cp, sched: sched, ref: ref, nodes: nodeList}

	// No ConfigMap yet: no model, and that is no refusal.
	m := r.scrape(ctx)
	if v, s := m.sum("edgesched_plugin_model_version"), m.sum("edgesched_plugin_model_refusals_total"); v != 0 || s != 0 {
		t.Fatalf("before the ConfigMap exists: model_version %s, refusals %s", m.series("edgesched_plugin_model_version"), m.series("edgesched_plugin_model_refusals_total"))
	}
	t.Logf("edge-scheduler ready without a model at %s", time.Since(began).Round(time.Millisecond))

	cms := cp.Client.CoreV1().ConfigMaps(cmModelNamespace)
	if !t.Run("CreateV1", func(t *testing.T) {
		r.t = t
		if _, err := cms.Create(ctx, modelConfigMapObject(signedWithVersion(t, arts.v1, trusted, 1)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.waitMetric(ctx, "model v1 installed from the ConfigMap", func(m metrics) bool {
			return m.sum("edgesched_plugin_model_version") == 1 && m.sum("edgesched_plugin_model_swaps_total") == 1
		})
		r.batch(ctx, "cm-v1", 16)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
		r.waitModelEvents(ctx, sources.EventModelInstalled, 1)
	}) {
		return
	}
	if !t.Run("UpdateV2", func(t *testing.T) {
		r.t = t
		if _, err := cms.Update(ctx, modelConfigMapObject(signedWithVersion(t, arts.v2, trusted, 2)), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.waitMetric(ctx, "model v2 swapped in", func(m metrics) bool {
			return m.sum("edgesched_plugin_model_version") == 2 && m.sum("edgesched_plugin_model_swaps_total") == 2
		})
		r.batch(ctx, "cm-v2", 12)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
	}) {
		return
	}
	t.Run("UntrustedV3Refused", func(t *testing.T) {
		r.t = t
		if _, err := cms.Update(ctx, modelConfigMapObject(signedWithVersion(t, arts.v1, untrusted, 3)), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		m := r.waitMetric(ctx, "the untrusted v3 refused", func(m metrics) bool {
			return m.sum("edgesched_plugin_model_refusals_total", `reason="signature"`) >= 1
		})
		if v, s := m.sum("edgesched_plugin_model_version"), m.sum("edgesched_plugin_model_swaps_total"); v != 2 || s != 2 {
			t.Fatalf("after the refusal: model_version %s, swaps %v (want v2 kept, 2 swaps)", m.series("edgesched_plugin_model_version"), s)
		}
		if all, sig := m.sum("edgesched_plugin_model_refusals_total"), m.sum("edgesched_plugin_model_refusals_total", `reason="signature"`); all != 1 || sig != 1 {
			t.Errorf("want exactly one refusal (signature): %s", m.series("edgesched_plugin_model_refusals_total"))
		}
		ev := r.waitModelEvents(ctx, sources.EventModelRefused, 1)
		e := ev[0]
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Namespace != cmModelNamespace ||
			!strings.Contains(e.Message, "signature") || !strings.Contains(e.Message, "keeping model version 2") {
			t.Errorf("ModelRefused event: type %s on %s %s/%s: %q; want a Warning on the ConfigMap naming the signature and the kept v2",
				e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		}
		t.Logf("event %s %s on %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
		if n := len(ev); n != 1 {
			t.Errorf("%d ModelRefused events, want 1", n)
		}
		// Scheduling goes on with v2.
		r.batch(ctx, "cm-after-refusal", 8)
		r.checkCluster(ctx)
		r.checkNoFailures(ctx)
		if v := r.scrape(ctx).sum("edgesched_plugin_model_version"); v != 2 {
			t.Errorf("model_version %v at the end, want 2", v)
		}
	})
	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}
