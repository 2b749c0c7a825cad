package kubefmt

import (
	"errors"
	"testing"
)

// TestParseConfigMapRef: NAMESPACE/NAME, or NAME in the default
// namespace; anything the API would refuse is ErrConfigMapRef.
func TestParseConfigMapRef(t *testing.T) {
	cases := []struct {
		ref, def, ns, name string
		ok                 bool
	}{
		{"edgesched-system/edgesched-model", "other", "edgesched-system", "edgesched-model", true},
		{"edgesched-model", DefaultNamespace, DefaultNamespace, "edgesched-model", true},
		{"deps", "site-a", "site-a", "deps", true},
		{"a.b", "ns", "ns", "a.b", true},
		{"", "ns", "", "", false},
		{"a/b/c", "ns", "", "", false},
		{"/name", "ns", "", "", false},
		{"ns/", "ns", "", "", false},
		{"Upper/name", "ns", "", "", false},
		{"ns/Name_1", "ns", "", "", false},
		{"name", "", "", "", false},
	}
	for _, tc := range cases {
		ns, name, err := ParseConfigMapRef(tc.ref, tc.def)
		if tc.ok {
			if err != nil || ns != tc.ns || name != tc.name {
				t.Errorf("ParseConfigMapRef(%q, %q) = %q, %q, %v; want %q, %q", tc.ref, tc.def, ns, name, err, tc.ns, tc.name)
			}
			continue
		}
		if !errors.Is(err, ErrConfigMapRef) {
			t.Errorf("ParseConfigMapRef(%q, %q) = %q, %q, %v; want ErrConfigMapRef", tc.ref, tc.def, ns, name, err)
		}
	}
}
