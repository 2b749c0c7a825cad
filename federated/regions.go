package federated

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/quant"
)

// Regions is the root's map of regional aggregators: each region's public
// key, and the region every site of a region belongs to. A region's key is
// trusted for its own sites only. Build it with Add or LoadRegions; it is
// read-only once built and safe for concurrent use.
type Regions struct {
	keys  map[string]ed25519.PublicKey
	sites map[string][]string
	of    map[string]string // site -> region
}

var _ RegionKeys = (*Regions)(nil)

// Add registers a region's key and sites; a site already in another
// region, or listed twice, is refused (ErrRegional), and nothing is
// registered.
func (r *Regions) Add(region string, pub ed25519.PublicKey, sites ...string) error {
	if !ValidSite(region) {
		return fmt.Errorf("%w: region %q is not a DNS label", ErrRegional, region)
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: region %q key of %d bytes", quant.ErrKey, region, len(pub))
	}
	if r.keys == nil {
		r.keys, r.sites, r.of = map[string]ed25519.PublicKey{}, map[string][]string{}, map[string]string{}
	}
	if _, dup := r.keys[region]; dup {
		return fmt.Errorf("%w: region %q registered twice", ErrRegional, region)
	}
	seen := make(map[string]bool, len(sites))
	for _, s := range sites {
		if !ValidSite(s) {
			return fmt.Errorf("%w: region %q: site %q is not a DNS label", ErrRegional, region, s)
		}
		if o, ok := r.of[s]; ok {
			return fmt.Errorf("%w: site %q is in regions %q and %q", ErrRegional, s, o, region)
		}
		if seen[s] {
			// it would count twice wherever the region's sites are counted
			return fmt.Errorf("%w: region %q lists site %q twice", ErrRegional, region, s)
		}
		seen[s] = true
	}
	r.keys[region] = append(ed25519.PublicKey(nil), pub...)
	for _, s := range sites {
		r.of[s] = region
	}
	r.sites[region] = slices.Sorted(slices.Values(sites))
	return nil
}

// RegionKey implements RegionKeys.
func (r *Regions) RegionKey(region string) (ed25519.PublicKey, bool) {
	if r == nil {
		return nil, false
	}
	k, ok := r.keys[region]
	return k, ok
}

// RegionOf is the region a site belongs to ("" and false: none; its
// updates come to the root directly).
func (r *Regions) RegionOf(site string) (string, bool) {
	if r == nil {
		return "", false
	}
	g, ok := r.of[site]
	return g, ok
}

// Names lists the regions, sorted.
func (r *Regions) Names() []string {
	if r == nil {
		return nil
	}
	return slices.Sorted(func(yield func(string) bool) {
		for k := range r.keys {
			if !yield(k) {
				return
			}
		}
	})
}

// Sites lists a region's sites, sorted.
func (r *Regions) Sites(region string) []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.sites[region])
}

// maxSitesFileBytes caps a REGION.sites file (some 15,000 sites of 63
// characters, or many more comments).
const maxSitesFileBytes = 1 << 20

// LoadRegions reads a directory of regions: REGION.pub, the region's
// public key (written by 'edgectl model keygen --name REGION'), and
// REGION.sites, its site IDs, one a line ('#' starts a comment). A site
// on two lines of a file is refused (ErrRegional, naming both lines), as
// Add refuses it.
func LoadRegions(dir string) (*Regions, error) {
	r := &Regions{}
	err := eachPublicKey(dir, "regions", func(name, file string, pub ed25519.PublicKey) error {
		sitesFile := filepath.Join(dir, name+".sites")
		raw, err := boundedio.ReadFile(context.Background(), sitesFile, maxSitesFileBytes)
		if err != nil {
			return fmt.Errorf("regions: %w", err)
		}
		var sites []string
		lineOf := map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, maxSitesFileBytes+1) // a line as long as the file (a long comment) is read whole
		for n := 1; sc.Scan(); n++ {
			line, _, _ := strings.Cut(sc.Text(), "#")
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			if first, dup := lineOf[line]; dup {
				return fmt.Errorf("%w: %s line %d: region %q lists site %q twice (first on line %d)", ErrRegional, sitesFile, n, name, line, first)
			}
			lineOf[line] = n
			sites = append(sites, line)
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%w: %s.sites: %v", ErrRegional, name, err)
		}
		if err := r.Add(name, pub, sites...); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
