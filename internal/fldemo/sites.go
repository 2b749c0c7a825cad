package fldemo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgesched/edgesched/sim/scenario"
)

// Site is a simulated site: a built-in scenario, optionally edited (text
// replacements of its YAML, each of which must match exactly once) so
// sites differ in hardware and workload.
type Site struct {
	Name string
	// Base is a built-in scenario name (scenario.Builtins).
	Base  string
	Edits [][2]string
}

// DefaultSites are four heterogeneous sites: two retail stores (ARM
// boards, amd64 mini-PCs, a T4 box per store; the west store's traffic is
// heavier and peaks later) and two factories (Jetson-class boards and T4
// servers running a vision pipeline; factory-b has more cameras, a busier
// line and fewer servers).
func DefaultSites() []Site {
	return []Site{
		{Name: "store-east", Base: "retail-fleet"},
		{Name: "store-west", Base: "retail-fleet", Edits: [][2]string{
			{"name: retail-fleet", "name: store-west"},
			{"ratePerHour: 90", "ratePerHour: 120"},
			{"peakHour: 15", "peakHour: 19"},
			{"seed: 7", "seed: 8"},
		}},
		{Name: "factory-a", Base: "factory-vision"},
		{Name: "factory-b", Base: "factory-vision", Edits: [][2]string{
			{"name: factory-vision", "name: factory-b"},
			{"count: 8", "count: 12"},
			{"count: 3", "count: 2"},
			{"ratePerHour: 30", "ratePerHour: 45"},
			{"{name: camera-ingest, replicas: 4", "{name: camera-ingest, replicas: 6"},
			{"seed: 11", "seed: 12"},
		}},
	}
}

// writeScenario writes the site's scenario file into dir, checks it loads
// and returns its path.
func (s Site) writeScenario(dir string) (string, error) {
	raw, err := scenario.BuiltinSource(s.Base)
	if err != nil {
		return "", fmt.Errorf("site %s: %w", s.Name, err)
	}
	text := string(raw)
	for _, e := range s.Edits {
		if n := strings.Count(text, e[0]); n != 1 {
			return "", fmt.Errorf("site %s: edit %q matches %d times in %s (want once)", s.Name, e[0], n, s.Base)
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	path := filepath.Join(dir, s.Name+".yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("write site scenario: %w", err)
	}
	if _, err := scenario.Load(path); err != nil {
		return "", fmt.Errorf("site %s: %w", s.Name, err)
	}
	return path, nil
}
