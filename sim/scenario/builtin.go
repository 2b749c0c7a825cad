package scenario

import (
	"embed"
	"fmt"
	"slices"
	"strings"
)

//go:embed builtin/*.yaml
var builtins embed.FS

// ErrUnknownBuiltin is returned for a built-in scenario name that does not exist.
var ErrUnknownBuiltin = fmt.Errorf("%w: built-in scenario", ErrUnknownRef)

// Builtins lists the built-in scenario names (use them as builtin:NAME).
func Builtins() []string {
	entries, _ := builtins.ReadDir("builtin")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// BuiltinSource returns the YAML of a built-in scenario.
func BuiltinSource(name string) ([]byte, error) { return builtinBytes(name) }

func builtinBytes(name string) ([]byte, error) {
	b, err := builtins.ReadFile("builtin/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("%w %q (have %s)", ErrUnknownBuiltin, name, strings.Join(Builtins(), ", "))
	}
	return b, nil
}
