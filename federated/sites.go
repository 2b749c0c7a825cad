package federated

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/quant"
)

// Registry is the set of sites allowed to send updates, each with its
// ed25519 public key. The zero value is empty; a Registry is read-only
// once built and safe for concurrent use.
type Registry struct {
	keys map[string]ed25519.PublicKey
}

var _ SiteKeys = (*Registry)(nil)

// Add registers a site's key.
func (r *Registry) Add(site string, pub ed25519.PublicKey) error {
	if !ValidSite(site) {
		return fmt.Errorf("%w: site %q is not a DNS label", ErrMessage, site)
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: site %q key of %d bytes", quant.ErrKey, site, len(pub))
	}
	if r.keys == nil {
		r.keys = map[string]ed25519.PublicKey{}
	}
	r.keys[site] = append(ed25519.PublicKey(nil), pub...)
	return nil
}

// SiteKey implements SiteKeys.
func (r *Registry) SiteKey(site string) (ed25519.PublicKey, bool) {
	if r == nil {
		return nil, false
	}
	k, ok := r.keys[site]
	return k, ok
}

// Sites lists the registered sites, sorted.
func (r *Registry) Sites() []string {
	var out []string
	if r == nil {
		return out
	}
	for s := range r.keys {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// LoadRegistry reads a directory of SITE.pub key files (written by
// 'edgectl model keygen --name SITE'): the file name is the site ID.
func LoadRegistry(dir string) (*Registry, error) {
	r := &Registry{}
	err := eachPublicKey(dir, "site registry", func(name, file string, pub ed25519.PublicKey) error {
		if err := r.Add(name, pub); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// eachPublicKey calls fn with every NAME.pub key file of dir (what names
// the directory in errors): its name, path and key. A directory without
// any is fine; one that cannot be read is not. The directory is listed,
// not globbed: a path holding glob metacharacters ("sites[1]", "keys*")
// names that one directory, never none or its siblings.
func eachPublicKey(dir, what string, fn func(name, file string, pub ed25519.PublicKey) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pub") {
			continue
		}
		f := filepath.Join(dir, e.Name())
		pub, err := quant.ReadPublicKey(f)
		if err != nil {
			return err
		}
		if err := fn(strings.TrimSuffix(filepath.Base(f), ".pub"), f, pub); err != nil {
			return err
		}
	}
	return nil
}
