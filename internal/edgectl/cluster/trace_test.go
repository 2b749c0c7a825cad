package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/agent/trace/tracefmt"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

// traceDB records a small site into a real trace.db: two nodes, six pods
// created a minute apart starting two hours ago, the first three deleted
// after 30 minutes.
func traceDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.db")
	s, err := trace.OpenStore(trace.DefaultStoreConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	evs := []tracefmt.Event{
		{Kind: tracefmt.NodeInfo, Time: start, Node: &tracefmt.Node{Name: "n1", CPUMilli: 8000, MemoryMiB: 16384, Zone: "a", Arch: sim.ArchAMD64}},
		{Kind: tracefmt.NodeInfo, Time: start, Node: &tracefmt.Node{Name: "n2", CPUMilli: 8000, MemoryMiB: 16384, Zone: "b", Arch: sim.ArchAMD64}},
	}
	for i := range 6 {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.PodArrival, Time: start.Add(time.Duration(i) * time.Minute),
			Pod: &tracefmt.Pod{UID: fmt.Sprint(i), Namespace: "shop", Name: fmt.Sprintf("web-%d", i), Service: "web", CPUMilli: 250, MemoryMiB: 128}})
	}
	for i := range 3 {
		evs = append(evs, tracefmt.Event{Kind: tracefmt.PodDeletion, Time: start.Add(time.Duration(i)*time.Minute + 30*time.Minute),
			Pod: &tracefmt.Pod{UID: fmt.Sprint(i), Namespace: "shop", Name: fmt.Sprintf("web-%d", i)}})
	}
	if _, err := s.Append(evs...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTraceExport(t *testing.T) {
	db := traceDB(t)
	out := filepath.Join(t.TempDir(), "site.yaml")
	stdout, _, err := run(t, "trace", "export", "--db", db, "--out", out)
	if err != nil || !strings.Contains(stdout, "2 nodes, 6 pods") {
		t.Fatalf("export: %v\n%s", err, stdout)
	}
	l, err := scenario.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// web-0 was created first (time 0) and deleted 30 minutes later
	if len(l.Workload.Pods) != 6 || l.Workload.Pods[0].Name != "shop/web-0" || l.Workload.Pods[0].Delete != 1800 || l.Workload.Pods[5].Create != 300 {
		t.Fatalf("exported pods: %+v", l.Workload.Pods)
	}
	// the simulator runs it
	simOut, _, err := run(t, "sim", "--scenario", out, "--policies", "best-fit")
	if err != nil || !strings.Contains(simOut, "best-fit") {
		t.Fatalf("sim on the export: %v\n%s", err, simOut)
	}
	// --since 80m: the three pods deleted 88 to 90 minutes ago ended
	// before the window; the three running ones remain
	stdout, _, err = run(t, "trace", "export", "--db", db, "--out", out, "--since", "80m")
	if err != nil || !strings.Contains(stdout, "3 pods") {
		t.Fatalf("export --since 80m: %v\n%s", err, stdout)
	}
}

func TestTraceExportErrors(t *testing.T) {
	db := traceDB(t)
	notTrace := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(notTrace, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "o.yaml")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no db", []string{"--out", out}, "--db is required"},
		{"no out", []string{"--db", db}, "--out is required"},
		{"missing db", []string{"--db", db + ".nope", "--out", out}, "no such file"},
		{"not a trace", []string{"--db", notTrace, "--out", out}, "trace: bad store"},
		// an empty file was "open X: write X: bad file descriptor"
		{"empty db", []string{"--db", emptyFile, "--out", out}, "--db " + emptyFile + ": not a trace database (an empty file)"},
		{"directory db", []string{"--db", filepath.Dir(emptyFile), "--out", out}, "not a trace database (a directory)"},
		{"out in a missing directory", []string{"--db", db, "--out", filepath.Join(out, "none", "o.yaml")}, "does not exist"},
		{"negative since", []string{"--db", db, "--out", out, "--since", "-1h"}, "positive duration"},
		{"bad since", []string{"--db", db, "--out", out, "--since", "yesterday"}, "invalid argument"},
		{"unknown flag", []string{"--db", db, "--out", out, "--follow"}, "unknown flag"},
		{"empty store", []string{"--db", emptyDB(t), "--out", out}, "nothing recorded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, append([]string{"trace", "export"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed export left %s", out)
	}
}

// TestTraceExportUsageErrors: a missing required flag and a negative
// --since are usage errors (exit 2); they were failures (exit 1).
func TestTraceExportUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out}, "--db is required"},
		{[]string{"--db", "trace.db"}, "--out is required"},
		{[]string{"--db", "trace.db", "--out", out, "--since", "-1h"}, "--since -1h0m0s: want a positive duration"},
	} {
		_, _, err := run(t, append([]string{"trace", "export"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !cli.IsUsage(err) {
			t.Errorf("%v: %v (usage error %v), want a usage error naming %q", tc.args, err, cli.IsUsage(err), tc.want)
		}
	}
}

// emptyDB is a trace.db with nothing recorded.
func emptyDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.db")
	s, err := trace.OpenStore(trace.DefaultStoreConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
