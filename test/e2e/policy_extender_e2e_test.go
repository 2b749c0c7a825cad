//go:build unix

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgesched/edgesched/policydoc"
)

// TestPolicyExtenderE2E runs TestPolicyE2E's scenario (policyScenario)
// with the extender enforcing the policy: the STOCK kube-scheduler
// configured from deploy/edge-scheduler/k3s-extender-policy.yaml (the
// extender filters and binds every pod, and prioritizes) and `edge-scheduler
// extender --policy-configmap`, against kine + kube-apiserver. Pods are
// created several at once, so the scheduler filters a replica before the
// previous one is bound: the rules hold because the extender's bind verb
// checks them again with the pods it bound counted (the refusals it made
// are reported).
func TestPolicyExtenderE2E(t *testing.T) {
	began := time.Now()
	bins := Build(t, KinePkg, APIServerPkg, SchedulerPkg, "github.com/edgesched/edgesched/cmd/edge-scheduler")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ec := startEdgeCluster(ctx, t, policyNodes)
	cp := ec.cp
	dir := t.TempDir()
	sm := writeSignedModel(t, dir, ec.art)
	ns, _, _ := strings.Cut(policydoc.DefaultConfigMap, "/")
	if err := CreateNamespace(ctx, cp.Client, ns); err != nil { // where edgectl policy apply writes
		t.Fatal(err)
	}
	ext, base := startExtender(t, cp, bins[3], sm, "--policy-configmap", policydoc.DefaultConfigMap)
	kubeconfig, err := cp.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := k3sExtenderConfigFile(t, dir, "k3s-extender-policy.yaml", kubeconfig, base)
	sched := cp.StartScheduler(t, SchedulerOptions{Binary: bins[2], Name: "kube-scheduler-k3s-extender-policy", ConfigFile: cfgPath})
	r := &edgeRun{t: t, cp: cp, sched: sched, nodes: ec.nodes, metricsURL: base + "/metrics"}
	r.waitMetric(ctx, "the extender without a policy", policyRules(0))
	s := newPolicyScenario(ctx, t, r, "policy-ext", corev1.DefaultSchedulerName)
	t.Logf("stock kube-scheduler and the extender ready at %s", time.Since(began).Round(time.Millisecond))
	s.run(ctx, t)
	if t.Failed() {
		return
	}

	// The extender's side: it filtered and bound every pod (20 bound,
	// reports-a filtered out everywhere), never panicked, and what its
	// bind verb refused.
	const bound = 3 + 3 + 4 + 4 + 3 + 3
	m, err := scrapeMetrics(ctx, base+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	okBind := m.sum("edgesched_extender_requests_total", `verb="bind"`, `result="ok"`)
	okFilter := m.sum("edgesched_extender_requests_total", `verb="filter"`, `result="ok"`)
	refused := m.sum("edgesched_extender_policy_bind_refusals_total")
	if int(okBind) != bound || int(okFilter) < bound+1 {
		t.Errorf("extender: %v ok bind calls (want %d) and %v ok filter calls (want at least %d): %s",
			okBind, bound, okFilter, bound+1, m.series("edgesched_extender_requests_total"))
	}
	if p := m.sum("edgesched_plugin_panics_total"); p != 0 {
		t.Errorf("extender panics: %v", p)
	}
	if ex, err := ext.Exited(); ex || err != nil {
		t.Errorf("the extender exited: %v", err)
	}
	t.Logf("extender: %v bindings, %v filter calls; the bind verb refused %v bindings a concurrent one had made break a rule (retried by the scheduler); rejections by rule: %s; whole test %s",
		okBind, okFilter, refused, m.series("edgesched_plugin_policy_filter_rejections_total"), time.Since(began).Round(time.Millisecond))
}
