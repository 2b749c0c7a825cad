package scenario

import (
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/sim/scenario/family"
)

//go:embed builtin/*.yaml
var builtins embed.FS

// ErrUnknownBuiltin is returned for a built-in scenario name that does not exist.
var ErrUnknownBuiltin = fmt.Errorf("%w: built-in scenario", ErrUnknownRef)

// Builtins lists the stored built-in scenarios (use them as builtin:NAME).
// The generated families (Families) are built-ins too.
func Builtins() []string {
	entries, _ := builtins.ReadDir("builtin")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Families lists the generated scenario families (sim/scenario/family),
// also loaded as builtin:NAME.
func Families() []string { return family.Names() }

// BuiltinSource returns the YAML of a built-in scenario (a family's for
// its default seed).
func BuiltinSource(name string) ([]byte, error) { return builtinBytes(name, nil) }

// BuiltinSourceSeed returns the YAML of a built-in scenario for a seed: a
// family generated with it (a file's YAML does not depend on the seed).
func BuiltinSourceSeed(name string, seed uint64) ([]byte, error) { return builtinBytes(name, &seed) }

// builtinBytes returns a built-in's YAML; a family is generated with the
// seed (nil: its default), a file is returned as it is.
func builtinBytes(name string, seed *uint64) ([]byte, error) {
	if b, err := builtins.ReadFile("builtin/" + name + ".yaml"); err == nil {
		return b, nil
	}
	s := uint64(family.DefaultSeed)
	if seed != nil {
		s = *seed
	}
	b, err := family.Generate(name, s)
	if errors.Is(err, family.ErrUnknown) {
		if base, _, versioned := strings.Cut(name, "@"); versioned && IsFamily(base) {
			return nil, fmt.Errorf("%w: %w", ErrUnknownBuiltin, err) // a family's version that does not exist
		}
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownBuiltin, name, strings.Join(append(Builtins(), Families()...), ", "))
	}
	return b, err
}

// IsFamily reports whether a built-in name is a generated family, whose
// seed draws the fleet as well as the workload.
func IsFamily(name string) bool {
	_, err := family.Lookup(strings.TrimPrefix(name, "builtin:"))
	return err == nil
}
