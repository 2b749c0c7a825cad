package edgectl_test

import (
	"slices"
	"strings"
	"testing"
)

// TestCompletion runs cobra's __complete (what the generated shell
// scripts call) and checks that values, not just flag names, complete.
func TestCompletion(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		want  []string // among the completions
		not   []string // not among them
		files bool     // the shell may complete file names too
	}{
		{"-o", []string{"scenario", "list", "-o", ""}, []string{"table", "json", "yaml"}, nil, false},
		{"-o prefix", []string{"round", "status", "-o", "y"}, []string{"yaml"}, []string{"json"}, false},
		{"policies", []string{"sim", "--policies", "fg"}, []string{"fgd"}, []string{"best-fit"}, false},
		{"policies, the next element", []string{"sim", "--policies", "fgd,be"}, []string{"fgd,best-fit"}, nil, false},
		{"policies, not twice", []string{"sim", "--policies", "fgd,"}, []string{"fgd,best-fit"}, []string{"fgd,fgd"}, false},
		{"learned models", []string{"sim", "--policies", "learned:e"}, []string{"learned:edge", "learned:edge-carbon", "learned:edge@net"}, []string{"learned:default"}, false},
		{"calibrate's baseline", []string{"scenario", "calibrate", "--policies", "k8s"}, []string{"k8s-default"}, nil, false},
		{"columns", []string{"sim", "--columns", "failure"}, []string{"failure_rate"}, nil, false},
		{"families", []string{"scenario", "calibrate", "--families", "retail"}, []string{"retail-stores"}, nil, false},
		{"scenario flag", []string{"sim", "--scenario", "builtin:retail"}, []string{"builtin:retail-fleet", "builtin:retail-stores"}, nil, true},
		{"scenario show", []string{"scenario", "show", ""}, []string{"builtin:factory-vision", "app:train-ticket"}, nil, false},
		{"scenario show, one argument", []string{"scenario", "show", "builtin:retail-fleet", ""}, nil, []string{"builtin:factory-vision"}, false},
		{"from-scenario", []string{"topology", "from-scenario", "builtin:f"}, []string{"builtin:factory-vision", "builtin:factory-lines"}, nil, true},
		{"model names", []string{"model", "quantize", "e"}, []string{"edge", "edge-carbon"}, []string{"default"}, true},
		{"bench model", []string{"bench", ""}, []string{"default", "edge"}, nil, true},
		{"progress", []string{"model", "quantize", "edge", "--progress", ""}, []string{"auto", "always", "never"}, nil, false},
		{"mode", []string{"sim", "--mode", "r"}, []string{"replay"}, []string{"inflate"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := run(t, append([]string{"__complete"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			directive := lines[len(lines)-1] // ":N", cobra's ShellCompDirective
			var got []string
			for _, l := range lines[:len(lines)-1] {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("%q completes %q, want %q among them", tc.args, got, w)
				}
			}
			for _, w := range tc.not {
				if slices.Contains(got, w) {
					t.Errorf("%q completes %q, want no %q", tc.args, got, w)
				}
			}
			// 4: ShellCompDirectiveNoFileComp; 0: the default (files too)
			if files := directive == ":0"; files != tc.files {
				t.Errorf("%q: directive %s, want file completion %v", tc.args, directive, tc.files)
			}
		})
	}
}
