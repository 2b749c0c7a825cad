package natsauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/edgesched/edgesched/federated"
)

// Errors of the package.
var (
	// ErrIdentity: a bad or unknown identity (name, NKey, duplicate).
	ErrIdentity = errors.New("natsauth: bad identity")
	// ErrFleet: a damaged or foreign fleet registry file.
	ErrFleet = errors.New("natsauth: bad fleet registry")
	// ErrSecret: a secret file that is missing, malformed or readable by
	// others.
	ErrSecret = errors.New("natsauth: bad secret file")
)

// FleetVersion is the registry format version; Decode refuses others.
const FleetVersion = 1

// MaxFleetBytes caps a registry file (tens of thousands of sites).
const MaxFleetBytes = 16 << 20

// Identity is one NATS user: a name and the public half of its NKey (a
// user key, "U..."). The seed never enters the registry.
type Identity struct {
	Name    string    `json:"name"`
	NKey    string    `json:"nkey"`
	Created time.Time `json:"created"`
}

// Site is a site's identity: its NATS user, the ID of its update-signing
// key (whose public key is in the coordinator's site directory), and,
// once revoked, when.
type Site struct {
	Identity
	UpdateKey string `json:"update_key"`
	// Region names the regional aggregator the site sends its updates
	// to ("": the root; docs/federated.md "Hierarchical rounds").
	Region  string     `json:"region,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// ModelKey is a model-signing key: its name (files NAME.key, NAME.pub),
// ID, and, once retired, when.
type ModelKey struct {
	Name    string     `json:"name"`
	ID      string     `json:"id"`
	Created time.Time  `json:"created"`
	Retired *time.Time `json:"retired,omitempty"`
}

// Fleet is the registry of a fleet's identities and keys (fleet.json):
// public data only. The zero value is an empty registry; a Fleet is a
// plain value, not safe for concurrent mutation.
type Fleet struct {
	V           int        `json:"v"`
	Coordinator *Identity  `json:"coordinator,omitempty"`
	Admins      []Identity `json:"admins,omitempty"`
	Sites       []Site     `json:"sites,omitempty"`
	// Regions are the regional aggregators' NATS users.
	Regions []Identity `json:"regions,omitempty"`
	// ModelKeys: every model-signing key ever made; Signing names the one
	// the coordinator signs with now.
	ModelKeys []ModelKey `json:"model_keys,omitempty"`
	Signing   string     `json:"signing,omitempty"`
}

// Site returns the named site, or nil.
func (f *Fleet) Site(name string) *Site {
	for i := range f.Sites {
		if f.Sites[i].Name == name {
			return &f.Sites[i]
		}
	}
	return nil
}

// Region returns the named region's identity, or nil.
func (f *Fleet) Region(name string) *Identity {
	for i := range f.Regions {
		if f.Regions[i].Name == name {
			return &f.Regions[i]
		}
	}
	return nil
}

// RegionSites lists region's active sites, in registry order.
func (f *Fleet) RegionSites(region string) []string {
	var out []string
	for _, s := range f.ActiveSites() {
		if s.Region == region {
			out = append(out, s.Name)
		}
	}
	return out
}

// ModelKey returns the named model key, or nil.
func (f *Fleet) ModelKey(name string) *ModelKey {
	for i := range f.ModelKeys {
		if f.ModelKeys[i].Name == name || f.ModelKeys[i].ID == name {
			return &f.ModelKeys[i]
		}
	}
	return nil
}

// ActiveSites lists the sites not revoked, in registry order.
func (f *Fleet) ActiveSites() []Site {
	var out []Site
	for _, s := range f.Sites {
		if s.Revoked == nil {
			out = append(out, s)
		}
	}
	return out
}

// Validate checks names (DNS labels, unique across all identities), NKeys
// (user public keys, unique), and the model keys.
func (f *Fleet) Validate() error {
	if f.V != FleetVersion {
		return fmt.Errorf("%w: version %d, this build reads %d", ErrFleet, f.V, FleetVersion)
	}
	names, nks := map[string]bool{}, map[string]string{}
	check := func(role string, id *Identity) error {
		if !federated.ValidSite(id.Name) {
			return fmt.Errorf("%w: %s name %q is not a DNS label", ErrIdentity, role, id.Name)
		}
		if names[role+"/"+id.Name] {
			return fmt.Errorf("%w: %s %q twice", ErrIdentity, role, id.Name)
		}
		names[role+"/"+id.Name] = true
		if !nkeys.IsValidPublicUserKey(id.NKey) {
			return fmt.Errorf("%w: %s %q: %q is not an NKey user public key", ErrIdentity, role, id.Name, id.NKey)
		}
		if other, ok := nks[id.NKey]; ok {
			return fmt.Errorf("%w: %s %q shares its NKey with %s", ErrIdentity, role, id.Name, other)
		}
		nks[id.NKey] = role + " " + id.Name
		return nil
	}
	if f.Coordinator != nil {
		if err := check("coordinator", f.Coordinator); err != nil {
			return err
		}
	}
	for i := range f.Admins {
		if err := check("admin", &f.Admins[i]); err != nil {
			return err
		}
	}
	for i := range f.Sites {
		s := &f.Sites[i]
		if err := check("site", &s.Identity); err != nil {
			return err
		}
		if len(s.UpdateKey) == 0 || len(s.UpdateKey) > 64 {
			return fmt.Errorf("%w: site %q has no update key ID", ErrIdentity, s.Name)
		}
	}
	for i := range f.Regions {
		if err := check("region", &f.Regions[i]); err != nil {
			return err
		}
	}
	for i := range f.Sites {
		if r := f.Sites[i].Region; r != "" && !names["region/"+r] {
			return fmt.Errorf("%w: site %q names region %q, which is not in the registry", ErrIdentity, f.Sites[i].Name, r)
		}
	}
	signing := false
	for i := range f.ModelKeys {
		k := &f.ModelKeys[i]
		if !federated.ValidSite(k.Name) || k.ID == "" || len(k.ID) > 64 {
			return fmt.Errorf("%w: model key %q (%q)", ErrIdentity, k.Name, k.ID)
		}
		if names["model-key/"+k.Name] {
			return fmt.Errorf("%w: model key %q twice", ErrIdentity, k.Name)
		}
		names["model-key/"+k.Name] = true
		if k.Name == f.Signing {
			if k.Retired != nil {
				return fmt.Errorf("%w: the signing model key %q is retired", ErrIdentity, k.Name)
			}
			signing = true
		}
	}
	if f.Signing != "" && !signing {
		return fmt.Errorf("%w: signing model key %q is not in the registry", ErrIdentity, f.Signing)
	}
	return nil
}

// DecodeFleet parses a registry strictly (size cap, unknown fields and
// trailing data refused) and validates it.
func DecodeFleet(b []byte) (*Fleet, error) {
	if len(b) > MaxFleetBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrFleet, len(b), MaxFleetBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f Fleet
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFleet, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrFleet)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Encode renders the registry (indented JSON), validating it first.
func (f *Fleet) Encode() ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode fleet: %w", err)
	}
	return append(b, '\n'), nil
}

// sortSites keeps the registry in a stable order (sites and regions by
// name).
func (f *Fleet) sortSites() {
	slices.SortFunc(f.Sites, func(a, b Site) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(f.Regions, func(a, b Identity) int { return strings.Compare(a.Name, b.Name) })
}
