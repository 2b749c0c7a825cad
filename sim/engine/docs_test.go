package engine

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// expand turns "a_{b,c}_{d,e}" into a_b_d, a_b_e, a_c_d, a_c_e.
func expand(s string) []string {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return []string{s}
	}
	j := strings.IndexByte(s[i:], '}') + i
	var out []string
	for _, alt := range strings.Split(s[i+1:j], ",") {
		out = append(out, expand(s[:i]+alt+s[j+1:])...)
	}
	return out
}

// docs/sim.md must document every measure a run can report.
func TestDocsListEveryMeasure(t *testing.T) {
	b, err := os.ReadFile("../../docs/sim.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_{},]+)`").FindAllStringSubmatch(string(b), -1) {
		for _, name := range expand(m[1]) {
			documented[name] = true
		}
	}
	for _, m := range Measures() {
		if !documented[m.Name] {
			t.Errorf("docs/sim.md does not document measure %q", m.Name)
		}
	}
}
