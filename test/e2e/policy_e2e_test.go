//go:build unix

package e2e

import (
	"bytes"
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
	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/policydoc"
)

// This file runs edge-scheduler with a scheduling policy (policyConfigMap)
// against the real control plane, as the shipped RBAC's ServiceAccount:
// sentences compiled by 'edgectl policy compile' and written by 'edgectl
// policy apply' hold in every binding; an updated policy is followed
// within seconds; a malformed one is refused and the last good one keeps
// working; an unsatisfiable hard rule gives a FailedScheduling event
// naming it.

const policyNodes = 12

// policySchedulerConfig is deploySchedulerConfig's file with
// policyConfigMap set (decoded and validated as the plugin will).
func policySchedulerConfig(t testing.TB, dir, kubeconfig, modelPath, keyDir string) string {
	t.Helper()
	path, _ := deploySchedulerConfig(t, dir, kubeconfig, modelPath, keyDir)
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
	args["policyConfigMap"] = policydoc.DefaultConfigMap
	ab, _ := yaml.Marshal(args)
	if _, err := edgeplugin.DecodeArgs(&runtime.Unknown{Raw: ab, ContentType: runtime.ContentTypeYAML}); err != nil {
		t.Fatal(err)
	}
	out, _ := yaml.Marshal(cfg)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// edgectlRun runs an edgectl command in process.
func edgectlRun(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := edgectl.Execute(ctx, edgectl.Options{}, args, &out, &errb); code != 0 {
		t.Fatalf("edgectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	}
	return out.String()
}

func servicePod(name, service string) *corev1.Pod {
	p := edgePod(name, edgeShape{cpu: "100m", mem: "64Mi"})
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["app"] = service
	return p
}

func TestPolicyE2E(t *testing.T) {
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	oc := startOpenbCluster(ctx, t, policyNodes, quantizeShipped)
	cp, nodeList, arts := oc.cp, oc.nodes, oc.art
	dir := t.TempDir()
	trusted := e2eSigner(t, 1)
	keyDir := trustedKeyDir(t, dir, trusted)
	modelPath := filepath.Join(dir, "model", "policy.esa")
	writeAtomic(t, modelPath, signedWithVersion(t, arts.v1, trusted, 1))
	kubeconfig := applyDeployRBAC(ctx, t, cp, dir)
	cfgPath := policySchedulerConfig(t, dir, kubeconfig, modelPath, keyDir)
	sched := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], ConfigFile: cfgPath,
		Args: []string{"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig}})
	ref, err := newSimReference(nodeList, oc.target)
	if err != nil {
		t.Fatal(err)
	}
	r := &edgeRun{t: t, cp: cp, sched: sched, ref: ref, nodes: nodeList}
	r.waitMetric(ctx, "model v1 loaded", func(m metrics) bool { return m.sum("edgesched_plugin_model_version") == 1 })
	s := newPolicyScenario(ctx, t, r, "policy", edgeSchedulerName)
	t.Logf("edge-scheduler ready at %s", time.Since(began).Round(time.Millisecond))
	s.run(ctx, t)
}

// policyScenario is the policy's end-to-end scenario against whatever
// enforces it (the plugin in TestPolicyE2E, the extender behind the stock
// kube-scheduler in TestPolicyExtenderE2E): r.waitMetric scrapes that
// component, pods go to schedulerName.
type policyScenario struct {
	cp            *ControlPlane
	r             *edgeRun
	admin         string // kubeconfig edgectl applies the policy with
	ns            string
	schedulerName string
	zoneOf        map[string]string // node -> zone
}

// newPolicyScenario creates namespace ns for the scenario's pods.
func newPolicyScenario(ctx context.Context, t *testing.T, r *edgeRun, ns, schedulerName string) *policyScenario {
	t.Helper()
	admin, err := r.cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := CreateNamespace(ctx, r.cp.Client, ns); err != nil {
		t.Fatal(err)
	}
	s := &policyScenario{cp: r.cp, r: r, admin: admin, ns: ns, schedulerName: schedulerName, zoneOf: map[string]string{}}
	for _, n := range r.nodes {
		s.zoneOf[n.Name] = n.Labels[edgeplugin.LabelZone]
	}
	return s
}

// bind creates n pods of service at once and returns where they went.
func (s *policyScenario) bind(ctx context.Context, t *testing.T, prefix, service string, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range n {
		p := servicePod(prefix+"-"+string(rune('a'+i)), service)
		p.Spec.SchedulerName = s.schedulerName
		if _, err := s.cp.Client.CoreV1().Pods(s.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := prefix + "-" + string(rune('a'+i))
		out[name] = s.r.waitBound(ctx, s.ns, name).Spec.NodeName
	}
	return out
}

// apply compiles sentences and applies the document with edgectl, in
// process; it returns when the apply began.
func (s *policyScenario) apply(ctx context.Context, t *testing.T, sentences ...string) time.Time {
	t.Helper()
	doc := filepath.Join(t.TempDir(), "policy.yaml")
	edgectlRun(ctx, t, append([]string{"policy", "compile", "--out", doc, "--zones", "edge-a,edge-b,edge-c", "--services", "api"}, sentences...)...)
	at := time.Now()
	edgectlRun(ctx, t, "policy", "apply", doc, "--kubeconfig", s.admin)
	return at
}

func policyRules(n int) func(m metrics) bool {
	return func(m metrics) bool { return m.sum("edgesched_plugin_policy_rules") == float64(n) }
}

// run: hard rules hold in every binding; an update is followed within
// seconds; a malformed document is refused and the last good one keeps
// working; an unsatisfiable rule is named in a FailedScheduling event.
func (s *policyScenario) run(ctx context.Context, t *testing.T) {
	r, cp, ns := s.r, s.cp, s.ns
	if !t.Run("HardRulesHold", func(t *testing.T) {
		r.t = t
		at := s.apply(ctx, t, "keep web and api in the same zone",
			"never run database in zone edge-a",
			"run at most 1 replica of cache per node")
		r.waitMetric(ctx, "the policy in use", policyRules(3))
		t.Logf("policy v1 (3 rules) in use %s after apply", time.Since(at).Round(time.Millisecond))
		web, api := s.bind(ctx, t, "web", "web", 3), s.bind(ctx, t, "api", "api", 3)
		db, cache := s.bind(ctx, t, "db", "database", 4), s.bind(ctx, t, "cache", "cache", 4)
		zones := map[string]bool{}
		for _, m := range []map[string]string{web, api} {
			for _, n := range m {
				zones[s.zoneOf[n]] = true
			}
		}
		if len(zones) != 1 {
			t.Errorf("web and api replicas in zones %v, want one zone", zones)
		}
		for p, n := range db {
			if s.zoneOf[n] == "edge-a" {
				t.Errorf("%s bound to %s in zone edge-a", p, n)
			}
		}
		seen := map[string]string{}
		for p, n := range cache {
			if q, ok := seen[n]; ok {
				t.Errorf("%s and %s share node %s", p, q, n)
			}
			seen[n] = p
		}
		t.Logf("web+api in %v; database on %v; cache on %v", zones, db, cache)
		// the placement's explanation names the rules that applied
		pod, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "web-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a := pod.Annotations[edgeplugin.AnnotationPolicy]; !strings.Contains(a, "rule-1: held: keep web and api in the same zone") {
			t.Errorf("web-a's %s annotation %q does not name rule-1", edgeplugin.AnnotationPolicy, a)
		}
	}) {
		return
	}
	if !t.Run("UpdateFollowed", func(t *testing.T) {
		r.t = t
		at := s.apply(ctx, t, "never run database in zone edge-b", "never run database in zone edge-c")
		r.waitMetric(ctx, "the updated policy in use", policyRules(2))
		took := time.Since(at)
		t.Logf("policy v2 (2 rules) in use %s after apply", took.Round(time.Millisecond))
		if took > 20*time.Second {
			t.Errorf("the update took %s to be in use", took)
		}
		for p, n := range s.bind(ctx, t, "db2", "database", 3) {
			if s.zoneOf[n] != "edge-a" {
				t.Errorf("%s bound to %s in zone %s; v2 leaves only edge-a", p, n, s.zoneOf[n])
			}
		}
	}) {
		return
	}
	if !t.Run("MalformedRefused", func(t *testing.T) {
		r.t = t
		cms := cp.Client.CoreV1().ConfigMaps("edgesched-system")
		cm, err := cms.Get(ctx, "edgesched-policy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data[policydoc.ConfigMapKey] = strings.Replace(cm.Data[policydoc.ConfigMapKey], "kind: zone", "kind: zones", 1)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		m := r.waitMetric(ctx, "the malformed policy refused", func(m metrics) bool {
			return m.sum("edgesched_plugin_policy_updates_total", `result="refused"`) >= 1
		})
		if n := m.sum("edgesched_plugin_policy_rules"); n != 2 {
			t.Fatalf("after a malformed policy: %v rules in use, want the last good 2", n)
		}
		for p, n := range s.bind(ctx, t, "db3", "database", 3) {
			if s.zoneOf[n] != "edge-a" {
				t.Errorf("%s bound to %s in zone %s: the last good policy should still hold", p, n, s.zoneOf[n])
			}
		}
	}) {
		return
	}
	t.Run("UnsatisfiableNamed", func(t *testing.T) {
		r.t = t
		s.apply(ctx, t, "run reports only in zone nowhere")
		r.waitMetric(ctx, "the unsatisfiable policy in use", policyRules(1))
		p := servicePod("reports-a", "reports")
		p.Spec.SchedulerName = s.schedulerName
		if _, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sel := fields.Set{"involvedObject.name": p.Name, "reason": "FailedScheduling"}.AsSelector().String()
		var msg string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil || len(l.Items) == 0 {
				return false, nil
			}
			msg = l.Items[0].Message
			return true, nil
		})
		if err != nil {
			t.Fatalf("no FailedScheduling event for %s: %v", p.Name, err)
		}
		if !strings.Contains(msg, "policy rule rule-1 (run reports only in zone nowhere)") {
			t.Errorf("FailedScheduling message %q does not name the rule", msg)
		}
		t.Logf("FailedScheduling: %s", msg)
		if err := cp.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
