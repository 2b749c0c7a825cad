package policy_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/internal/edgectl/policy"
	"github.com/edgesched/edgesched/internal/testutil/filefixture"
	"github.com/edgesched/edgesched/policydoc"
)

func TestPolicyCompile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.yaml")
	stdout, _, err := run(t, "policy", "compile", "keep payment and orders in the same zone", "GPU任务只能运行在A10 GPU上", "--out", out, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got policy.CompiledPolicy
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rules) != 2 || got.Rules[0].Kind != "colocate" || got.Rules[1].Kind != "gpu-model" || got.Rules[1].Chinese != "GPU任务只能运行在A10 GPU上" {
		t.Fatalf("rules: %+v", got.Rules)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := policydoc.Decode(b); err != nil || len(d.Rules) != 2 {
		t.Fatalf("written document: %v %+v", err, d)
	}
	// a refusal names the clause, the word and what was expected
	_, _, err = run(t, "policy", "compile", "keep payment near orders")
	if err == nil || !strings.Contains(err.Error(), `"near"`) || !strings.Contains(err.Error(), "same node or the same zone") {
		t.Fatalf("refusal: %v", err)
	}
	// names from a scenario
	stdout, _, err = run(t, "policy", "compile", "run frontend only in zone store-north", "--scenario", "builtin:retail-fleet")
	if err != nil || !strings.Contains(stdout, "zone store-north") {
		t.Fatalf("scenario names: %v\n%s", err, stdout)
	}
	// a name in two roles (east a zone of --zones and a service here): the
	// printed sentences mark the services, so that each compiles back, with
	// the same names, to the same rule ("keep payment and east in the
	// same zone" would read east as a zone)
	stdout, _, err = run(t, "policy", "compile", "keep payment service and east service in the same zone", "--zones", "east", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var clash policy.CompiledPolicy
	if err := json.Unmarshal([]byte(stdout), &clash); err != nil || len(clash.Rules) != 1 {
		t.Fatalf("%v: %s", err, stdout)
	}
	r := clash.Rules[0]
	if !slices.Equal(r.Services, []string{"east", "payment"}) && !slices.Equal(r.Services, []string{"payment", "east"}) {
		t.Fatalf("services %v, want payment and east", r.Services)
	}
	for _, sentence := range []string{r.English, r.Chinese} {
		stdout, _, err := run(t, "policy", "compile", sentence, "--zones", "east", "-o", "json")
		var back policy.CompiledPolicy
		if err == nil {
			err = json.Unmarshal([]byte(stdout), &back)
		}
		if err != nil || len(back.Rules) != 1 || back.Rules[0].Kind != r.Kind || !slices.Equal(back.Rules[0].Services, r.Services) {
			t.Errorf("%q compiles back to %+v (%v), want %+v", sentence, back.Rules, err, r)
		}
	}
}

func TestPolicyExplain(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(p, []byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nscoreShare: 30\nrules:\n- {kind: cpu-cap, effect: preferred, weight: 40, pods: {}, maxCPUPercent: 80}\n"), 0o644)
	out, _, err := run(t, "policy", "explain", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prefer to keep each node at or under 80% CPU (weight 40)", "每个节点的CPU尽量不超过百分之80（权重40）", "decide 30%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// with --zones east, a service named east is marked so that the
	// sentence compiles back; a GPU model spelt otherwise than the
	// glossary has no sentence: printed plainly, with a note
	os.WriteFile(p, []byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n"+
		"- {kind: colocate, effect: required, pods: {services: [payment, east]}, scope: zone}\n"+
		"- {kind: gpu-model, effect: required, pods: {gpu: true}, gpuModels: [a10]}\n"), 0o644)
	out, _, err = run(t, "policy", "explain", p, "--zones", "east")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"keep payment service and east service in the same zone", `(nlp: no sentence reads back as the rule: GPU model "a10" is spelt "A10" in the glossary)`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	os.WriteFile(p, []byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n- {kind: cpu-cap, effect: required, pods: {}, maxCPUPercent: 800}\n"), 0o644)
	if _, _, err := run(t, "policy", "explain", p); err == nil || !strings.Contains(err.Error(), "rules[0].maxCPUPercent") {
		t.Fatalf("invalid document: %v", err)
	}
}

// TestPolicyDryRun: on builtin:retail-fleet a hard co-location of
// checkoutservice and paymentservice takes the pair's cross-zone share
// to 0 and no binding with the policy breaks it.
func TestPolicyDryRun(t *testing.T) {
	out, _, err := run(t, "policy", "dry-run", "--scenario", "builtin:retail-fleet", "--text", "keep checkoutservice and paymentservice in the same zone", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got policy.DryRunOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Pairs) != 1 || got.Pairs[0].After != 0 || got.Pairs[0].Before <= 0 {
		t.Fatalf("pairs: %+v", got.Pairs)
	}
	if len(got.Rules) != 1 || got.Rules[0].BrokenAfter != 0 {
		t.Fatalf("rules: %+v", got.Rules)
	}
	table, _, err := run(t, "policy", "dry-run", "--scenario", "builtin:retail-fleet", "--text", "keep checkoutservice and paymentservice in the same zone")
	if err != nil || !strings.Contains(table, "CO-LOCATED PAIR") || !strings.Contains(table, "carbon_g") {
		t.Fatalf("table: %v\n%s", err, table)
	}
	if _, _, err := run(t, "policy", "dry-run", "--scenario", "builtin:retail-fleet"); err == nil || !strings.Contains(err.Error(), "--policy FILE or --text") {
		t.Fatalf("no policy: %v", err)
	}
}

// TestPolicyApply: create, update conditioned on the read resourceVersion,
// a stale --resource-version refused, a conflicting write refused. The
// real API server's behaviour is covered by test/e2e (TestPolicyE2E).
func TestPolicyApply(t *testing.T) {
	doc1 := "apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n- {kind: cpu-cap, effect: required, pods: {}, maxCPUPercent: 80}\n"
	doc2 := strings.Replace(doc1, "80", "70", 1)
	client := fake.NewClientset()
	ctx := context.Background()
	res, err := policy.ApplyPolicy(ctx, client, "edgesched-system", "edgesched-policy", doc1, "")
	if err != nil || res.Action != "created" {
		t.Fatalf("create: %v %+v", err, res)
	}
	// the fake tracker does not bump resourceVersion: set one as the API server would
	cm, _ := client.CoreV1().ConfigMaps("edgesched-system").Get(ctx, "edgesched-policy", metav1.GetOptions{})
	cm.ResourceVersion = "7"
	client.Tracker().Update(cmGVR, cm, "edgesched-system")
	if _, err := policy.ApplyPolicy(ctx, client, "edgesched-system", "edgesched-policy", doc2, "6"); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("stale --resource-version: %v", err)
	}
	// the update carries the version it read
	var sent string
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent = a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetResourceVersion()
		return false, nil, nil
	})
	res, err = policy.ApplyPolicy(ctx, client, "edgesched-system", "edgesched-policy", doc2, "7")
	if err != nil || res.Action != "updated" || sent != "7" || res.Previous != "7" {
		t.Fatalf("update: %v %+v (sent resourceVersion %q)", err, res, sent)
	}
	if res, err := policy.ApplyPolicy(ctx, client, "edgesched-system", "edgesched-policy", doc2, ""); err != nil || res.Action != "unchanged" {
		t.Fatalf("same document: %v %+v", err, res)
	}
	// a write that loses the race is refused, not retried over the other
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(cmGR, "edgesched-policy", nil)
	})
	if _, err := policy.ApplyPolicy(ctx, client, "edgesched-system", "edgesched-policy", doc1, ""); err == nil || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("conflict: %v", err)
	}
	// the command refuses an invalid document before any API call
	p := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(p, []byte(strings.Replace(doc1, "cpu-cap", "cpu-caps", 1)), 0o644)
	if _, _, err := run(t, "policy", "apply", p, "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "rules[0].kind") {
		t.Fatalf("invalid document: %v", err)
	}
}

var (
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cmGR  = cmGVR.GroupResource()
)

// TestPolicyFlagErrors: a missing input or a flag value wrong on its face
// is a usage error (exit 2) naming the flag (dry-run's --baseline was
// reported as "--policies"; --mode and --samples were failures, --samples
// unnamed); an empty -f file and an --out that is a directory are named;
// apply refuses a kubeconfig over cmdutil.MaxKubeconfigBytes before
// client-go reads it whole.
func TestPolicyFlagErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(doc, []byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n- {kind: cpu-cap, effect: required, pods: {}, maxCPUPercent: 80}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filefixture.Sparse(t, dir, "big-kubeconfig", cmdutil.MaxKubeconfigBytes+1)
	const rule = "prefer low-carbon grids with weight 100"
	for _, tc := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"compile"}, "no sentences: give them as arguments or with -f FILE", true},
		{[]string{"compile", rule, "-f", empty}, "give sentences or -f FILE, not both", true},
		{[]string{"compile", "-f", empty}, "-f " + empty + ": no sentences: the file is empty", false},
		{[]string{"compile", rule, "--out", dir}, "--out " + dir + ": is a directory", false},
		{[]string{"dry-run"}, "give --policy FILE or --text SENTENCE (one of them)", true},
		{[]string{"dry-run", "--text", rule, "--policy", doc}, "give --policy FILE or --text SENTENCE (one of them)", true},
		{[]string{"dry-run", "--text", rule, "--baseline", "nosuch"}, `--baseline: unknown value "nosuch"`, true},
		{[]string{"dry-run", "--text", rule, "--baseline", "all"}, "--baseline: one policy, got", true},
		{[]string{"dry-run", "--text", rule, "--mode", "fast"}, `--mode: sim: invalid value: mode "fast"`, true},
		{[]string{"dry-run", "--text", rule, "--samples", "-1"}, "--samples: sim: invalid value: samples must be in [2, 100000]", true},
		{[]string{"apply", doc, "--timeout", "-1s"}, "--timeout -1s: must be positive", true},
		{[]string{"apply", doc, "--kubeconfig", big}, "kubeconfig: " + big + ": input exceeds its size limit", false},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := run(t, append([]string{"policy"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if cli.IsUsage(err) != tc.usage {
				t.Errorf("usage error (exit 2): %v, want %v", cli.IsUsage(err), tc.usage)
			}
		})
	}
}
