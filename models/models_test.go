package models

import (
	"errors"
	"slices"
	"testing"

	"github.com/edgesched/edgesched/policy"
)

func TestShippedModels(t *testing.T) {
	names := Names()
	if !slices.Equal(names, []string{"default", "edge", "edge-carbon", "edge-loaded", "edge-sage"}) {
		t.Fatalf("shipped models %v, want [default edge edge-carbon edge-loaded edge-sage]", names)
	}
	for _, n := range names {
		m, err := Load(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		// Each records how to reproduce it: its config's name and seed.
		if m.Meta["name"] != n || m.Meta["config"] == nil || m.Meta["seed"] == nil {
			t.Errorf("%s: provenance %v", n, m.Meta)
		}
		if m.Schema.ID != policy.SchemaID {
			t.Errorf("%s: schema %s", n, m.Schema.ID)
		}
	}
	if _, err := Load("nosuch"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Load(nosuch) = %v, want ErrUnknown", err)
	}
}
