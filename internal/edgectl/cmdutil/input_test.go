package cmdutil

import (
	"fmt"
	"testing"

	"github.com/edgesched/edgesched/sim/scenario/family"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []uint64
		err  bool
	}{
		{"7", []uint64{7}, false},
		{"1,3, 5", []uint64{1, 3, 5}, false},
		{"1-3,9", []uint64{1, 2, 3, 9}, false},
		{"18446744073709551615", []uint64{18446744073709551615}, false},
		{"18446744073709551614-18446744073709551615", []uint64{18446744073709551614, 18446744073709551615}, false},
		{"1-1000", nil, false},
		{"1-1001", nil, true},
		{"", nil, true},
		{"-3", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseSeeds(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("parseSeeds(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if tt.want != nil && (len(got) != len(tt.want) || got[0] != tt.want[0] || got[len(got)-1] != tt.want[len(tt.want)-1]) {
			t.Errorf("parseSeeds(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestScenarioName: reports name a family with the calibration version
// that ran; other scenarios keep their documents' names.
func TestScenarioName(t *testing.T) {
	for _, c := range []struct{ ref, name, want string }{
		{"builtin:retail-stores", "retail-stores", fmt.Sprintf("retail-stores@v%d", family.Latest)},
		{"builtin:retail-stores@v1", "retail-stores", "retail-stores@v1"},
		{"builtin:retail-fleet", "retail-fleet", "retail-fleet"},
		{"my-fleet.yaml", "mine", "mine"},
		{"retail-stores", "from-a-file", "from-a-file"}, // a file named like a family
	} {
		if got := scenarioName(c.ref, c.name); got != c.want {
			t.Errorf("scenarioName(%q, %q) = %q, want %q", c.ref, c.name, got, c.want)
		}
	}
}
