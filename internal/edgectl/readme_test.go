package edgectl_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEEdgeFigures runs the README's command for its edge results
// (`edgectl sim --scenario builtin:retail-fleet --scenario-seeds ...`,
// default columns) and checks that each figure the paragraph under
// it states is in the versus tables it prints: a README that drifts from
// what the command prints fails here.
func TestREADMEEdgeFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs 15 simulations")
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	// the command: "./bin/edgectl sim --scenario builtin:retail-fleet
	// --scenario-seeds ..." with its continuation line, without the comment
	i := strings.Index(readme, "./bin/edgectl sim --scenario builtin:retail-fleet --scenario-seeds")
	if i < 0 {
		t.Fatal("README has no edgectl sim --scenario builtin:retail-fleet --scenario-seeds command")
	}
	cmdText := readme[i:]
	cmdText = cmdText[:strings.Index(cmdText, "\n")] + " " + strings.SplitN(cmdText[strings.Index(cmdText, "\n")+1:], "\n", 2)[0]
	cmdText, _, _ = strings.Cut(cmdText, "#")
	args := strings.Fields(strings.ReplaceAll(cmdText, "\\", " "))[1:] // without ./bin/edgectl
	if strings.Contains(strings.Join(args, " "), "--columns") {
		t.Fatalf("the README's command sets --columns: %q", args)
	}
	out, _, err := run(t, append(args, "--progress", "never")...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	// the paragraph's figures, read from the README itself
	para := readme[strings.Index(readme, "On the built-in retail fleet, on five workloads"):]
	para = strings.Join(strings.Fields(para[:strings.Index(para, "(docs/training.md)")]), " ")
	figure := func(re string) string {
		m := regexp.MustCompile(re).FindStringSubmatch(para)
		if m == nil {
			t.Fatalf("the README's paragraph no longer says %s:\n%s", re, para)
		}
		return m[1]
	}
	versus := func(policy string) string {
		j := strings.Index(out, policy+" versus k8s-default")
		if j < 0 {
			t.Fatalf("no %s versus table:\n%s", policy, out)
		}
		rest, _, _ := strings.Cut(out[j:], "\n\n") // the table ends at a blank line
		return rest
	}
	for _, c := range []struct {
		policy, measure, change string
	}{
		{"learned:edge", "failure_rate", "-" + figure(`cuts scheduling failures by (\d+)%`) + "%"},
		{"learned:edge", "cross_zone_traffic", "-" + figure(`cross-zone dependency traffic by (\d+)%`) + "%"},
		{"learned:edge", "latency_p95_ms", "-" + figure(`p95 latency proxy by (\d+)%`) + "%"},
		{"learned:edge", "util_active_cpu_mean", "+" + figure(`CPU utilisation of active nodes by (\d+)%`) + "%"},
		{"learned:edge-carbon", "carbon_g", "-" + figure(`emits (\d+)% less CO2`) + "%"},
	} {
		table := versus(c.policy)
		row := regexp.MustCompile(`(?m)^\s*` + c.measure + `\s.*$`).FindString(table)
		// measure, before, after, change, then the paired columns
		if f := strings.Fields(row); len(f) < 4 || f[3] != c.change {
			t.Errorf("README: %s %s %s; the command prints %q", c.policy, c.measure, c.change, strings.TrimSpace(row))
		}
	}
}
