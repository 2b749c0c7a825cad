package policydoc

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func readExample(t testing.TB) []byte {
	b, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeExample(t *testing.T) {
	d, err := Decode(readExample(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rules) != 10 {
		t.Fatalf("rules = %d, want 10", len(d.Rules))
	}
	if d.Rules[1].Name != "rule-2" {
		t.Errorf("unnamed rule got name %q, want rule-2", d.Rules[1].Name)
	}
	// every kind appears once in the example
	seen := map[Kind]bool{}
	for _, r := range d.Rules {
		seen[r.Kind] = true
	}
	for _, k := range Kinds() {
		if !seen[k] {
			t.Errorf("example lacks kind %s", k)
		}
	}
	// round trip through YAML
	y, err := d.EncodeYAML()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Decode(y)
	if err != nil {
		t.Fatalf("re-decode: %v\n%s", err, y)
	}
	if len(d2.Rules) != len(d.Rules) || d2.Rules[3].During.From != 22 {
		t.Errorf("round trip lost data")
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := string(readExample(t))
	cases := []struct{ name, doc, want string }{
		{"unknown field", strings.Replace(good, "scoreShare: 40", "scoreShare: 40\nbogus: 1", 1), `unknown field "bogus"`},
		{"unknown rule field", strings.Replace(good, "  scope: zone\n", "  scope: zone\n  zone: x\n", 1), `unknown field "zone"`},
		{"version", strings.Replace(good, "policy/v1", "policy/v9", 1), "apiVersion"},
		{"kind", strings.Replace(good, "kind: colocate", "kind: colocated", 1), "rules[0].kind"},
		{"field of other kind", strings.Replace(good, "  scope: zone\n", "  scope: zone\n  maxCarbon: 5\n", 1), "rules[0].maxCarbon: not used by kind colocate"},
		{"weight on required", strings.Replace(good, "  effect: required\n  pods: {services: [checkout]}", "  effect: required\n  weight: 3\n  pods: {services: [checkout]}", 1), "rules[1].weight"},
		{"weight range", strings.Replace(good, "weight: 60", "weight: 600", 1), "rules[3].weight: 600 is outside"},
		{"hours", strings.Replace(good, "{from: 22, to: 6}", "{from: 22, to: 24}", 1), "rules[3].during"},
		{"cpu", strings.Replace(good, "maxCPUPercent: 80", "maxCPUPercent: 180", 1), "rules[4].maxCPUPercent"},
		{"label", strings.Replace(good, "tier=edge", "tier", 1), "rules[6].label"},
		{"arch", strings.Replace(good, "[arm64]", "[riscv]", 1), "rules[7].arch[0]"},
		{"one service colocate", strings.Replace(good, "[payment, orders]", "[payment]", 1), "rules[0].pods.services"},
		{"duplicate key", strings.Replace(good, "scoreShare: 40", "scoreShare: 40\nscoreShare: 41", 1), "already set"},
		{"bad service", strings.Replace(good, "[checkout]", "[Check_Out]", 1), "rules[1].pods.services[0]"},
		{"preferred hours", strings.Replace(good, "  effect: required\n  pods: {services: [batch]}", "  effect: preferred\n  weight: 5\n  pods: {services: [batch]}", 1), "rules[9].effect"},
		// EncodeYAML could not write it (found by nlp's FuzzCompile)
		{"control character in source", strings.Replace(good, "source: keep payment", "source: \"keep\\x7f\"\n# ", 1), "rules[0].source: character U+007F at byte 4"},
		{"C1 control in source", strings.Replace(good, "source: keep payment", "source: \"a\\x85b\"\n# ", 1), "rules[0].source: character U+0085 at byte 1"},
		{"empty", "", "empty"},
		{"not yaml", "{[", "invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.doc))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, c.want)
			}
		})
	}
	big := make([]byte, MaxDocumentBytes+1)
	if _, err := Decode(big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: err = %v, want ErrTooLarge", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(readExample(f))
	f.Add([]byte(`{"apiVersion":"edgesched.policy/v1","kind":"SchedulingPolicy","rules":[{"kind":"cpu-cap","effect":"required","pods":{},"maxCPUPercent":80}]}`))
	f.Add([]byte("apiVersion: edgesched.policy/v1\nkind: SchedulingPolicy\nrules: []\n"))
	// a source EncodeYAML cannot write
	f.Add([]byte(`{"apiVersion":"edgesched.policy/v1","kind":"SchedulingPolicy","rules":[{"kind":"cpu-cap","effect":"required","pods":{},"maxCPUPercent":80,"source":"a\u007fb"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error not wrapped: %v", err)
			}
			return
		}
		// a valid document renders and survives a round trip
		for i := range d.Rules {
			_ = d.Rules[i].English()
			_ = d.Rules[i].Chinese()
		}
		y, err := d.EncodeYAML()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(y); err != nil {
			t.Fatalf("valid document does not round-trip: %v\n%s", err, y)
		}
	})
}
