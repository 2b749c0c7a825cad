package sources

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// policyDoc is a document of required spread rules with these names.
func policyDoc(names ...string) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "- name: %s\n  kind: spread\n  effect: required\n  pods: {services: [web]}\n  scope: node\n  maxPerDomain: 1\n", n)
	}
	return []byte(b.String())
}

// rejectionSeries reads policy_filter_rejections_total from the registry
// the scheduler serves: rule -> count.
func rejectionSeries(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "edgesched_plugin_policy_filter_rejections_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestPolicyRejectionSeriesFollowTheDocument: a new document keeps the
// rejection series of the rules it still has (their counts too) and
// deletes those of the rules it dropped, and of any other rule counted
// (one a Check on the replaced document counted late); clearing the
// policy deletes every one, so months of edits leave one series per rule
// in use.
func TestPolicyRejectionSeriesFollowTheDocument(t *testing.T) {
	RegisterPolicyMetrics()
	var r PolicyRules
	step := func(what string, install []byte, count []string, want map[string]float64) {
		t.Helper()
		if install != nil {
			if _, err := r.Install(install); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		} else if !r.Clear() {
			t.Fatalf("%s: nothing to clear", what)
		}
		for _, rule := range count {
			CountPolicyRejection(rule)
		}
		got := rejectionSeries(t)
		keys := slices.Sorted(maps.Keys(got))
		if len(got) != len(want) {
			t.Fatalf("%s: series %v, want %v", what, keys, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: %s counted %v, want %v (series %v)", what, k, got[k], v, keys)
			}
		}
	}
	step("first document", policyDoc("a", "b"), []string{"a", "a", "b"}, map[string]float64{"a": 2, "b": 1})
	// a Check still running on the first document counts a once more
	// after the change: its series is back, until the next change
	step("b kept, a dropped, c added", policyDoc("b", "c"), []string{"c", "a"}, map[string]float64{"a": 1, "b": 1, "c": 1})
	step("c dropped", policyDoc("b"), nil, map[string]float64{"b": 1})
	step("cleared", nil, nil, map[string]float64{})
}
