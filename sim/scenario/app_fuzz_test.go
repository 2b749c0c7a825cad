package scenario

import (
	"errors"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// FuzzParseApp: no app document makes ParseApp panic; a refusal is a
// *sim.LineError naming the file and wraps one of the package's (or
// sim's) sentinels; an accepted app has its apiVersion, kind, a name and
// uniquely named services, and marshalled back to YAML it parses to an
// app that marshals to the same document. Seeded with every shipped app
// (sim/scenario/apps) and synthetic apps of each shape.
func FuzzParseApp(f *testing.F) {
	for _, name := range apps.Names() {
		b, err := apps.Source(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, shape := range apps.Shapes() {
		b, err := apps.Synthetic(apps.Spec{Shape: shape, Services: 6, Seed: 1, Rate: 10})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a: &x [*x, *x]\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseApp(b, "fuzz.yaml")
		if err != nil {
			var le *sim.LineError
			if a != nil || !errors.As(err, &le) || le.File != "fuzz.yaml" {
				t.Fatalf("refusal %v (%T, app %v) is not a LineError naming the file, or returned an app", err, err, a)
			}
			known := false
			for _, s := range []error{ErrSyntax, ErrUnknownRef, ErrTooLarge, sim.ErrInvalid, sim.ErrDuplicate, sim.ErrUnknownRef} {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("refusal %v wraps no sentinel", err)
			}
			return
		}
		if a.APIVersion != APIVersion || a.Kind != AppKind || a.Name == "" || len(a.Services) == 0 {
			t.Fatalf("accepted app %q (%s %s) with %d services", a.Name, a.APIVersion, a.Kind, len(a.Services))
		}
		seen := map[string]bool{}
		for _, s := range a.Services {
			if s.Name == "" || seen[s.Name] {
				t.Fatalf("accepted a service named %q twice or not at all", s.Name)
			}
			seen[s.Name] = true
		}
		once, err := yaml.Marshal(a)
		if err != nil {
			t.Fatalf("an accepted app does not marshal: %v", err)
		}
		back, err := ParseApp(once, "again.yaml")
		if err != nil {
			t.Fatalf("the accepted app marshalled back is refused: %v\n%s", err, once)
		}
		twice, err := yaml.Marshal(back)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("round trip changed the app (%v):\n%s\n---\n%s", err, once, twice)
		}
	})
}
