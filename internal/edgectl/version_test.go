package edgectl_test

import (
	"strings"
	"testing"

	"github.com/edgesched/edgesched/internal/cli"
)

func TestVersion(t *testing.T) {
	want := cli.Info().Line("edgectl") + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, err := run(t, args...)
		if err != nil || out != want {
			t.Fatalf("%v: %v %q, want %q", args, err, out, want)
		}
	}
	if !strings.HasPrefix(want, "edgectl dev commit ") {
		t.Errorf("an unstamped test binary's version line: %q", want)
	}
	if _, _, err := run(t, "version", "extra"); !cli.IsUsage(err) {
		t.Errorf("version with an argument: %v, want a usage error", err)
	}
}
