package kubefmt_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/edgesched/edgesched/kubefmt"
)

// FuzzParseConfigMapRef: no reference makes ParseConfigMapRef panic; a
// refusal returns nothing and wraps ErrConfigMapRef; an accepted one is a
// DNS-1123 label namespace and a DNS-1123 subdomain name, the reference
// itself when it names its namespace (else NAME in the default
// namespace), and NAMESPACE/NAME parses to the same pair whatever the
// default. (edge-plugin/apis/config/v1's FuzzSplitConfigMapRef holds the
// plugin's args to the same reading: kubefmt imports no plugin package.)
// Seeded with the shipped references (deploy/).
func FuzzParseConfigMapRef(f *testing.F) {
	for _, ref := range []string{
		"edgesched-system/edgesched-model", "edgesched-system/edgesched-dependencies",
		"edgesched-system/edgesched-topology", "edgesched-system/edgesched-policy",
		"edgesched-model", "kube-system/a.b.c", "", "/", "ns/", "/name", "a/b/c", "NS/name", "ns/Name",
	} {
		f.Add(ref, kubefmt.DefaultNamespace)
	}
	f.Add("name", "")
	f.Add("name", "Bad_NS")
	f.Fuzz(func(t *testing.T, ref, def string) {
		ns, name, err := kubefmt.ParseConfigMapRef(ref, def)
		_, _, hasNS := strings.Cut(ref, "/")
		if err != nil {
			if ns != "" || name != "" || !errors.Is(err, kubefmt.ErrConfigMapRef) {
				t.Fatalf("refusal %v (%q/%q) does not wrap ErrConfigMapRef or returned a reference", err, ns, name)
			}
			return
		}
		if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("%q accepted as %q/%q", ref, ns, name)
		}
		if hasNS && ns+"/"+name != ref || !hasNS && (ns != def || name != ref) {
			t.Fatalf("%q (default %q) read as %q/%q", ref, def, ns, name)
		}
		if ns2, name2, err := kubefmt.ParseConfigMapRef(ns+"/"+name, "other"); err != nil || ns2 != ns || name2 != name {
			t.Fatalf("%s/%s reads back as %q/%q: %v", ns, name, ns2, name2, err)
		}
	})
}
