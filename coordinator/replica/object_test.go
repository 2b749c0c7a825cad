package replica

import (
	"math/rand/v2"
	"testing"
)

// TestObjectEpochGen: the names Ship writes, and those of the format
// before the nonce, parse to their epoch and generation; nothing else
// does, not even a name that reads the same with its digits written
// otherwise.
func TestObjectEpochGen(t *testing.T) {
	for range 100 {
		e, g := rand.Uint64N(1<<40)+1, rand.Uint64()
		if ge, gg, ok := objectEpochGen(objectName(e, g, rand.Uint64())); !ok || ge != e || gg != g {
			t.Fatalf("objectName(%d, %d, ...) parses to %d, %d, %v", e, g, ge, gg, ok)
		}
	}
	for name, want := range map[string][2]uint64{
		"e7-g3-5f1c0e2a9b3d4c6e.db":                      {7, 3},
		"e7-g0-0000000000000000.db":                      {7, 0},
		"e1-g1.db":                                       {1, 1},
		"e18446744073709551615-g18446744073709551615.db": {1<<64 - 1, 1<<64 - 1},
	} {
		if e, g, ok := objectEpochGen(name); !ok || [2]uint64{e, g} != want {
			t.Errorf("%s: %d, %d, %v; want %v", name, e, g, ok, want)
		}
	}
	for _, name := range []string{
		"", "e", ".db", "e1-g1", "e1-g1.DB", "e1-g1.db.bak", "x/e1-g1.db", "e0-g1.db", "e-1-g1.db", "e+1-g1.db",
		"e01-g1.db", "e1-g01.db", "e1-g+1.db", "e1-g1-.db", "e1-g1-5F1C0E2A9B3D4C6E.db", "e1-g1-5f1c0e2a9b3d4c6.db",
		"e1-g1-05f1c0e2a9b3d4c6e.db", "e1-g1-5f1c0e2a9b3d4c6e-1.db", "e18446744073709551616-g1.db", "e1-g1-0x1c0e2a9b3d4c6e.db",
	} {
		if e, g, ok := objectEpochGen(name); ok {
			t.Errorf("%q parses to %d, %d", name, e, g)
		}
	}
}
