package simulate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/fldemo"
)

func TestDemoSimulator(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "demo", "--parts", "sim", "--out", dir, "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"inflate mode, 1523 nodes", "retail-fleet, replay mode", "retail-stores@v2, replay mode", "fgd", "k8s-default", "trimaran-tlp", "learned", "learned:edge", "network-overhead", "learned:edge-loaded", "learned:edge-sage"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Contains(out, "Federated") {
		t.Error("--parts sim ran the federated part")
	}
	for _, f := range []string{"openb/unallocated_gpu.png", "openb/curve.csv", "retail-fleet/utilization.png", "retail-fleet/results.json", "retail-stores/results.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestDemoFederated runs the federated part small (two factory sites, two
// rounds of one PPO iteration of one episode) through the real system and
// checks the progress, the tables and the files; the claim that federated
// beats local is the full demo's, reported in its closing figures.
func TestDemoFederated(t *testing.T) {
	dir := t.TempDir()
	out, _, err := run(t, "demo", "--parts", "federated", "--out", dir, "--sites", "factory-a,factory-b",
		"--rounds", "2", "--local-iterations", "1", "--local-episodes", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"embedded NATS server with JetStream", "round 1/2 published: model v2 from 2 site updates",
		"round 2/2 published: model v3", "every site verified and installed model v3", "local-only factory-b: 2 rounds done", "local-only factory-a: round 1/2 trained",
		"local:factory-a", "federated", "k8s-default", "locally trained policies on the other sites' workloads"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// the per-site status of an open round, when a tick caught one (a
	// round of 1 PPO iteration may end between two ticks)
	if strings.Contains(out, "updates accepted;") && !strings.Contains(out, "factory-a ") {
		t.Errorf("a round status without the sites:\n%s", out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "federated", fldemo.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var res fldemo.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.FinalVersion != 3 || len(res.Rounds) != 2 || len(res.Verdicts) != 2 || len(res.Policies) != 5 {
		t.Fatalf("results: version %d, %d rounds, %d verdicts, policies %v", res.FinalVersion, len(res.Rounds), len(res.Verdicts), res.Policies)
	}
	for _, r := range res.Rounds {
		if r.Accepted != 2 {
			t.Errorf("round %d took %d updates, want 2", r.Round, r.Accepted)
		}
	}
	for _, f := range []string{fldemo.ReportFile, fldemo.PlotFile, "sites/factory-b.yaml"} {
		if st, err := os.Stat(filepath.Join(dir, "federated", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestDemoFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown part", []string{"demo", "--parts", "sim,bogus"}, `unknown part "bogus"`},
		{"unknown site", []string{"demo", "--parts", "federated", "--sites", "mars"}, `unknown site "mars"`},
		{"one site", []string{"demo", "--parts", "federated", "--sites", "factory-a"}, "at least 2"},
		{"no rounds", []string{"demo", "--parts", "federated", "--rounds", "0", "--out", "-"}, "Rounds 0"},
		// the federated part's flags are checked before the simulator
		// part's minutes, each error naming its flag (a usage error)
		{"no rounds, before the simulator part", []string{"demo", "--rounds", "0", "--out", t.TempDir(), "--progress", "never"}, "--rounds: fldemo: bad config: Rounds 0"},
		{"negative server learning rate", []string{"demo", "--parts", "federated", "--server-lr", "-1"}, "--server-lr: fldemo: bad config: ServerLR -1"},
		{"no local episodes", []string{"demo", "--parts", "federated", "--local-episodes", "0"}, "--local-episodes: fldemo: bad config"},
		{"negative parallel", []string{"demo", "--parts", "federated", "--parallel", "-1", "--rounds", "0"}, "--parallel: -1, want 0"},
		{"bad progress", []string{"demo", "--parts", "federated", "--progress", "sometimes", "--rounds", "0"}, `--progress: "sometimes"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := run(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if !cli.IsUsage(err) {
				t.Errorf("%v is not a usage error (exit 2)", err)
			}
			if out != "" {
				t.Errorf("stdout %q: a part ran before the flags were refused", out)
			}
		})
	}
}
