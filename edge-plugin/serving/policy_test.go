package serving

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/edgesched/edgesched/edge-plugin/internal/plugintest"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
)

// TestCapLines: lines that fit are joined as they are; otherwise the
// whole lines that fit are kept and a last line says how many were left
// out, all within the limit.
func TestCapLines(t *testing.T) {
	line := strings.Repeat("x", 99) // 100 bytes with its newline
	many := func(n int) []string {
		l := make([]string, n)
		for i := range l {
			l[i] = fmt.Sprintf("%02d", i) + line[2:]
		}
		return l
	}
	cases := []struct {
		name  string
		lines []string
		limit int
		kept  int    // lines kept whole
		left  string // "": nothing left out
	}{
		{"none", nil, 100, 0, ""},
		{"fits exactly", many(10), 999, 10, ""},
		{"one byte over", many(10), 998, 9, "... 1 more rule left out: the annotation is capped at 998 bytes"},
		{"half fit", many(10), 560, 4, "... 6 more rules left out: the annotation is capped at 560 bytes"},
		{"first line too long", []string{strings.Repeat("y", 1000), "short"}, 500, 0, "... 2 more rules left out: the annotation is capped at 500 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := capLines(tc.lines, tc.limit)
			if len(got) > tc.limit {
				t.Fatalf("%d bytes, above the limit %d", len(got), tc.limit)
			}
			want := strings.Join(tc.lines[:tc.kept], "\n")
			if tc.left != "" {
				want = strings.TrimPrefix(want+"\n"+tc.left, "\n")
			}
			if got != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestPolicyExplainCapped: a policy of many rules with long sentences
// (63 services of 60 letters each, the document well under
// policydoc.MaxDocumentBytes) that all apply to a pod makes an
// explanation of 159 KB; the edgesched.io/policy value is cut at
// a line boundary within kubefmt.MaxPolicyBytes and says how many rules
// it left out. It was written whole: 159 KB of the 256 KiB Kubernetes
// allows for all of a pod's annotations together.
func TestPolicyExplainCapped(t *testing.T) {
	const rules = 40
	var services []string
	for i := range 63 {
		services = append(services, fmt.Sprintf("svc-%02d-%s", i, strings.Repeat("a", 53)))
	}
	var doc strings.Builder
	doc.WriteString("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n")
	for i := range rules {
		fmt.Fprintf(&doc, "- {name: r%03d, kind: arch, effect: preferred, weight: 50, pods: {services: [web, %s]}, arch: [arm64]}\n", i, strings.Join(services, ", "))
	}
	c := New(nil, Options{Target: sim.NewTargetWorkload(nil, 0.95)})
	c.SetClock(func() time.Time { return telT0 })
	if _, err := c.Policy().Install([]byte(doc.String())); err != nil {
		t.Fatalf("policy of %d bytes: %v", doc.Len(), err)
	}
	nodes, pods := plugintest.PolicyCluster()
	var all []fwk.NodeInfo
	for _, n := range nodes {
		var on []*v1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == n.Name {
				on = append(on, p)
			}
		}
		all = append(all, nodeInfo(n, on...))
	}
	pc := c.NewPolicyCycle(plugintest.ServicePod("web-0", "web"), all)
	if pc == nil {
		t.Fatal("no rule applies to web")
	}
	got := pc.Explain(all[2]) // n3, arm64: every rule satisfied
	if len(got) > kubefmt.MaxPolicyBytes {
		t.Fatalf("annotation of %d bytes, above the cap of %d", len(got), kubefmt.MaxPolicyBytes)
	}
	lines := strings.Split(got, "\n")
	kept := lines[:len(lines)-1]
	sentence := "prefer to run web, " + strings.Join(services[:62], ", ") + " and " + services[62] + " on arm64 nodes (weight 50)"
	for i, l := range kept {
		if want := fmt.Sprintf("r%03d: 1.00 (weight 50): ", i); l != want+sentence {
			t.Fatalf("line %d is not rule r%03d's whole line: %.200s...", i, i, l)
		}
	}
	full := len(lines[0]) * rules // every line is as long
	if len(kept) == 0 || full < 8*kubefmt.MaxPolicyBytes {
		t.Fatalf("%d lines kept, the whole explanation %d bytes: not a test of the cap", len(kept), full)
	}
	// as many whole lines as fit with the marker
	if len(got)+len(lines[0])+1 <= kubefmt.MaxPolicyBytes {
		t.Errorf("%d bytes kept: room for another line of %d", len(got), len(lines[0]))
	}
	if want := fmt.Sprintf("... %d more rules left out: the annotation is capped at %d bytes", rules-len(kept), kubefmt.MaxPolicyBytes); lines[len(lines)-1] != want {
		t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
	}
	t.Logf("%d of %d rules in %d bytes (the whole explanation: %d bytes)", len(kept), rules, len(got), full)
}
