package kubefmt

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrConfigMapRef is the sentinel every refused ConfigMap reference
// matches (errors.Is).
var ErrConfigMapRef = errors.New("bad ConfigMap reference")

// ParseConfigMapRef parses a ConfigMap reference as every edgesched
// command line takes one (docs/cli.md, "One name per concept"):
// NAMESPACE/NAME, or NAME alone, which is in defaultNamespace (a
// program's --namespace, DefaultNamespace unless it has one). The
// namespace must be a DNS-1123 label and the name a DNS-1123 subdomain,
// as the API requires; "" is refused (a program whose flag may be empty
// checks that first).
func ParseConfigMapRef(ref, defaultNamespace string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok {
		namespace, name = defaultNamespace, ref
	}
	switch {
	case ref == "":
		return "", "", fmt.Errorf("%w: empty, want [NAMESPACE/]NAME", ErrConfigMapRef)
	case strings.Contains(name, "/"):
		return "", "", fmt.Errorf("%w %q: want [NAMESPACE/]NAME", ErrConfigMapRef, ref)
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", "", fmt.Errorf("%w %q: namespace %q: %s", ErrConfigMapRef, ref, namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", fmt.Errorf("%w %q: name %q: %s", ErrConfigMapRef, ref, name, strings.Join(msgs, "; "))
	}
	return namespace, name, nil
}
