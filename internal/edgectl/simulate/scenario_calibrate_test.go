package simulate_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
)

// TestScenarioCalibrate: the calibrate verb prints one row per family with
// the three figures and a verdict, and refuses unknown families and bad
// seeds with errors that name them.
func TestScenarioCalibrate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two families: skipped with -short")
	}
	out, _, err := run(t, "scenario", "calibrate", "--families", "retail-stores,builtin:rail-stations", "--scenario-seeds", "1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "retail-stores") || !strings.Contains(lines[1], "training") ||
		!strings.HasPrefix(lines[2], "rail-stations") || !strings.Contains(lines[2], "held-out") || !strings.Contains(lines[3], "k8s-default, run seed 1") {
		t.Fatalf("calibrate output:\n%s", out)
	}
	// seed 1 of both is inside the bands (TestCalibration checks the
	// figures); both fail some pods, so both headroom cells are filled
	for _, l := range lines[1:3] {
		if !strings.Contains(l, " 1/1 ") || strings.Count(l, "%") != 5 {
			t.Errorf("row %q", l)
		}
	}
	// the document carries the headroom measures as shares, and the table
	// prints the same figures
	js, _, err := run(t, "scenario", "calibrate", "--families", "retail-stores", "--scenario-seeds", "1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Families []struct {
			Headroom []struct {
				Measure string  `json:"measure"`
				Mean    float64 `json:"mean"`
			} `json:"headroom"`
		} `json:"families"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Families) != 1 || len(doc.Families[0].Headroom) != 2 {
		t.Fatalf("headroom in %s", js)
	}
	for i, h := range doc.Families[0].Headroom {
		want := []string{"failures_with_room", "latency_capped_share"}[i]
		if h.Measure != want || !(h.Mean >= 0 && h.Mean <= 1) {
			t.Errorf("headroom %d: %+v, want %s in [0, 1]", i, h, want)
		}
		if cell := fmt.Sprintf("%.1f%% (", 100*h.Mean); !strings.Contains(lines[1], cell) {
			t.Errorf("table row %q lacks %s's %s", lines[1], h.Measure, cell)
		}
	}
	// a version is calibrated against its own bands: version 1 has no
	// capped-share band (its seed 1 has 18% of the samples at the cap and
	// is in its three bands), the latest has four
	vs, _, err := run(t, "scenario", "calibrate", "--families", "retail-stores@v1,retail-stores", "--scenario-seeds", "1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var versions struct {
		Families []struct {
			Family   string `json:"family"`
			InBands  int    `json:"seeds_in_all_bands"`
			Measures []struct {
				Measure string  `json:"measure"`
				Mean    float64 `json:"mean"`
				BandHi  float64 `json:"band_hi"`
			} `json:"measures"`
		} `json:"families"`
	}
	if err := json.Unmarshal([]byte(vs), &versions); err != nil {
		t.Fatal(err)
	}
	if f := versions.Families; len(f) != 2 || f[0].Family != "retail-stores@v1" || len(f[0].Measures) != 3 || f[0].InBands != 1 ||
		f[1].Family != "retail-stores" || len(f[1].Measures) != 4 || f[1].Measures[3].Measure != "latency_capped_share" ||
		f[1].Measures[3].BandHi != 0.05 || !(f[1].Measures[3].Mean <= 0.05) {
		t.Errorf("versions: %s", vs)
	}
	for _, c := range []struct{ args, want string }{
		{"--families nosuch", `unknown family "nosuch"`},
		{"--families retail-stores@v9", `version "v9"`},
		{"--scenario-seeds x", "--scenario-seeds"},
		{"--policies nosuch", "--policies"},
		{"--parallel -1", "--parallel: -1, want 0 (the number of CPUs) or more"},
	} {
		_, _, err := run(t, append([]string{"scenario", "calibrate"}, strings.Fields(c.args)...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.args, err, c.want)
		}
		if !cli.IsUsage(err) { // a flag value that is not valid: exit 2
			t.Errorf("%s: %v is not a usage error", c.args, err)
		}
	}
}

// TestScenarioShowFamilyAndApp: show prints a family for a seed (another
// seed, another fleet) and a library app; list names families and apps
// with their roles.
func TestScenarioShowFamilyAndApp(t *testing.T) {
	a, _, err := run(t, "scenario", "show", "builtin:rail-stations", "--seed", "3")
	if err != nil || !strings.Contains(a, "family rail-stations, seed 3") || !strings.Contains(a, "app: train-ticket") {
		t.Fatalf("show family: %v\n%.300s", err, a)
	}
	b, _, _ := run(t, "scenario", "show", "builtin:rail-stations", "--seed", "4")
	if a == b {
		t.Error("seeds 3 and 4 give the same family document")
	}
	app, _, err := run(t, "scenario", "show", "app:online-boutique")
	if err != nil || !strings.Contains(app, "kind: App") || !strings.Contains(app, "name: frontend") {
		t.Fatalf("show app: %v\n%.300s", err, app)
	}
	if _, _, err := run(t, "scenario", "show", "app:nosuch"); err == nil || !strings.Contains(err.Error(), "unknown app") {
		t.Errorf("unknown app: %v", err)
	}
	list, _, err := run(t, "scenario", "list")
	if err != nil || !strings.Contains(list, "builtin:rail-stations") || !strings.Contains(list, "held-out family") || !strings.Contains(list, "app:train-ticket") {
		t.Fatalf("list: %v\n%s", err, list)
	}
}
