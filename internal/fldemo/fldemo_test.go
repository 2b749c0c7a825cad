package fldemo

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgesched/edgesched/sim/scenario"
)

// TestDefaultSitesDiffer: every default site's scenario loads, and the
// edited ones really differ from their base (node count or pods).
func TestDefaultSitesDiffer(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string][2]int{}
	for _, s := range DefaultSites() {
		path, err := s.writeScenario(dir)
		if err != nil {
			t.Fatal(err)
		}
		l, err := scenario.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		sizes[s.Name] = [2]int{len(l.Cluster.Nodes), len(l.Workload.Pods)}
	}
	if sizes["store-east"] == sizes["store-west"] || sizes["factory-a"] == sizes["factory-b"] {
		t.Fatalf("edited sites equal their base: %v", sizes)
	}
	// factory-b: 12 instead of 8 Jetsons, 2 instead of 3 servers: +3 nodes.
	if d := sizes["factory-b"][0] - sizes["factory-a"][0]; d != 3 {
		t.Fatalf("factory-b has %d more nodes than factory-a, want 3 (%v)", d, sizes)
	}
}

func TestSiteEditsMustMatchOnce(t *testing.T) {
	cases := []struct {
		name string
		edit [2]string
		want string
	}{
		{"no match", [2]string{"ratePerHour: 12345", "x"}, "matches 0 times"},
		{"many matches", [2]string{"cpuMilli", "x"}, "times in retail-fleet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Site{Name: "s", Base: "retail-fleet", Edits: [][2]string{c.edit}}
			if _, err := s.writeScenario(t.TempDir()); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	if _, err := (Site{Name: "s", Base: "no-such"}).writeScenario(t.TempDir()); err == nil {
		t.Fatal("unknown base: want an error")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no out", func(c *Config) { c.Out = "" }, "Out required"},
		{"one site", func(c *Config) { c.Sites = c.Sites[:1] }, "1 sites"},
		{"duplicate site", func(c *Config) { c.Sites[1].Name = c.Sites[0].Name }, "unique DNS label"},
		{"bad lr", func(c *Config) { c.Local.LR = 2 }, "Local"},
		{"no held-out", func(c *Config) { c.HeldOut = nil }, "HeldOut"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Out = t.TempDir()
			c.Sites = append([]Site(nil), c.Sites...)
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrConfig with %q", err, tc.want)
			}
		})
	}
	c := DefaultConfig()
	c.Out = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
}

// TestStatusLineDue: a per-site status is printed when it changes, and
// repeated every statusEvery while it does not, never more often.
func TestStatusLineDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var s siteStatusLine
	steps := []struct {
		line string
		at   time.Duration
		want bool
	}{
		{"a training, b training", 0, true},                            // the first
		{"a training, b training", time.Second, false},                 // unchanged, 1 s later
		{"a sent, b training", 2 * time.Second, true},                  // changed
		{"a sent, b training", 2*time.Second + statusEvery - 1, false}, // unchanged, just under the period
		{"a sent, b training", 2*time.Second + statusEvery, true},      // the heartbeat
		{"a sent, b sent", 2*time.Second + statusEvery + time.Millisecond, true},
	}
	for i, st := range steps {
		if got := s.due(st.line, t0.Add(st.at)); got != st.want {
			t.Errorf("step %d (%q at %v): due %v, want %v", i, st.line, st.at, got, st.want)
		}
	}
}
