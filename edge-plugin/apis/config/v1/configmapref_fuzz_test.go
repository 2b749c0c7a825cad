package v1

import (
	"strings"
	"testing"

	"github.com/edgesched/edgesched/kubefmt"
)

// FuzzSplitConfigMapRef: no reference makes SplitConfigMapRef panic, and
// the plugin's args read a NAMESPACE/NAME ConfigMap reference as every
// edgesched command line does (kubefmt.ParseConfigMapRef): accepted by
// both or neither, and the same namespace and name, so a reference given
// to an edgectl command and to the scheduler means one ConfigMap. A
// reference without its namespace is refused in the args (they have no
// default namespace). Seeded with the shipped references (deploy/).
func FuzzSplitConfigMapRef(f *testing.F) {
	for _, ref := range []string{
		"edgesched-system/edgesched-model", "edgesched-system/edgesched-dependencies",
		"edgesched-system/edgesched-topology", "edgesched-system/edgesched-policy",
		"edgesched-model", "kube-system/a.b.c", "", "/", "ns/", "/name", "a/b/c", "NS/name", "ns/Name",
	} {
		f.Add(ref)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		ns, name := SplitConfigMapRef(ref)
		if !strings.Contains(ref, "/") {
			if ns != "" || name != "" {
				t.Fatalf("%q without a namespace read as %q/%q", ref, ns, name)
			}
			return
		}
		kns, kname, err := kubefmt.ParseConfigMapRef(ref, "default")
		if (err == nil) != (name != "") || err == nil && (kns != ns || kname != name) {
			t.Fatalf("%q: the args read %q/%q, edgectl %q/%q (%v)", ref, ns, name, kns, kname, err)
		}
	})
}
