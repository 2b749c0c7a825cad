package natsauth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/quant"
)

// A fleet directory holds the registry and every file made from it
// (docs/security.md):
//
//	fleet.json                      the registry (public data only)
//	nats/auth.conf                  generated authorization block
//	nats/nats-server.conf           generated server configuration (WriteServerConfig)
//	sites/SITE.pub                  update-verification keys of active sites (edge-coordinator --sites)
//	sites-revoked/SITE.pub          ... of revoked sites (kept for the audit)
//	models/NAME.pub, NAME.retired   model-signing public keys, trusted and retired
//	                                (agents' and the plugin's keyring)
//	secrets/coordinator/nats.nk     the coordinator's NKey seed
//	secrets/coordinator/NAME.key    model-signing private keys
//	secrets/admins/NAME/nats.nk     operators' NKey seeds
//	secrets/sites/SITE/nats.nk      a site's NKey seed        } ship to the site,
//	secrets/sites/SITE/SITE.key     its update-signing key    } then delete here
//	secrets/regions/REGION/nats.nk  a regional aggregator's NKey seed (ship to it)
//
// Secrets are mode 0600 in 0700 directories.
const (
	FleetFile      = "fleet.json"
	AuthConfFile   = "nats/auth.conf"
	ServerConfFile = "nats/nats-server.conf"
	SitesDir       = "sites"
	RevokedDir     = "sites-revoked"
	ModelKeysDir   = "models"
	SeedFileName   = "nats.nk"
)

// Dir is a fleet directory. Every change takes an exclusive lock on the
// directory, commits the registry with one atomic rename, then brings the
// derived files in line (Reconcile), so a crash at any point is repaired
// by running the command again. Now and Rand default to the wall clock
// and crypto/rand.Reader.
type Dir struct {
	Path string
	Now  func() time.Time
	Rand io.Reader
}

func (d Dir) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC()
	}
	return time.Now().UTC()
}

func (d Dir) rand() io.Reader {
	if d.Rand != nil {
		return d.Rand
	}
	return rand.Reader
}

func (d Dir) p(parts ...string) string { return filepath.Join(append([]string{d.Path}, parts...)...) }

// CoordinatorSeed, AdminSeed and SiteSecrets locate secrets.
func (d Dir) CoordinatorSeed() string       { return d.p("secrets", "coordinator", SeedFileName) }
func (d Dir) AdminSeed(name string) string  { return d.p("secrets", "admins", name, SeedFileName) }
func (d Dir) RegionSeed(name string) string { return d.p("secrets", "regions", name, SeedFileName) }
func (d Dir) SiteSecrets(site string) string {
	return d.p("secrets", "sites", site)
}

// ModelKeyFile is a model-signing private key's path.
func (d Dir) ModelKeyFile(name string) string { return d.p("secrets", "coordinator", name+".key") }

// File is a path inside the directory (FleetFile, SitesDir, ...).
func (d Dir) File(rel string) string { return d.p(rel) }

// ErrExists: the identity or key already exists.
var ErrExists = errors.New("natsauth: already exists")

// Load reads the registry.
func (d Dir) Load() (*Fleet, error) {
	f, err := os.Open(d.p(FleetFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %v (make one with 'edgectl auth init')", ErrFleet, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFleetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFleet, err)
	}
	fl, err := DecodeFleet(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.p(FleetFile), err)
	}
	return fl, nil
}

// lock takes the directory's exclusive lock (released by the returned
// function).
func (d Dir) lock() (func(), error) {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return nil, fmt.Errorf("fleet directory: %w", err)
	}
	f, err := os.OpenFile(d.p(".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock fleet directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock fleet directory: %w", err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// update runs change on the registry under the lock, commits it and
// reconciles the derived files.
func (d Dir) update(create bool, change func(f *Fleet) error) (*Fleet, error) {
	unlock, err := d.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var f *Fleet
	if create {
		if _, err := os.Stat(d.p(FleetFile)); err == nil {
			return nil, fmt.Errorf("%w: %s (the fleet is initialised)", ErrExists, d.p(FleetFile))
		}
		f = &Fleet{V: FleetVersion}
	} else if f, err = d.Load(); err != nil {
		return nil, err
	}
	if err := change(f); err != nil {
		return nil, err
	}
	f.sortSites()
	b, err := f.Encode()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(d.p(FleetFile), b, 0o644); err != nil {
		return nil, err
	}
	return f, d.reconcile(f)
}

// Reconcile brings the derived files in line with the registry: the
// coordinator's site directory, the revoked sites, the model trust
// directory and the authorization block. It is idempotent.
func (d Dir) Reconcile() error {
	unlock, err := d.lock()
	if err != nil {
		return err
	}
	defer unlock()
	f, err := d.Load()
	if err != nil {
		return err
	}
	return d.reconcile(f)
}

func (d Dir) reconcile(f *Fleet) error {
	for _, dir := range []string{SitesDir, RevokedDir, ModelKeysDir, "nats"} {
		if err := os.MkdirAll(d.p(dir), 0o755); err != nil {
			return err
		}
	}
	for _, s := range f.Sites {
		active, revoked := d.p(SitesDir, s.Name+".pub"), d.p(RevokedDir, s.Name+".pub")
		if s.Revoked == nil {
			continue
		}
		if _, err := os.Stat(active); err == nil {
			if err := os.Rename(active, revoked); err != nil {
				return fmt.Errorf("move revoked site key: %w", err)
			}
		}
	}
	for _, k := range f.ModelKeys {
		pub, retired := d.p(ModelKeysDir, k.Name+".pub"), d.p(ModelKeysDir, k.Name+quant.RetiredSuffix)
		if k.Retired == nil {
			continue
		}
		if _, err := os.Stat(pub); err == nil {
			if err := os.Rename(pub, retired); err != nil {
				return fmt.Errorf("retire model key file: %w", err)
			}
		}
		// the private key of a retired key has no use left
		if err := os.Remove(d.ModelKeyFile(k.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove retired private key: %w", err)
		}
	}
	if f.Coordinator == nil {
		return nil
	}
	auth, err := RenderAuthorization(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(d.p(AuthConfFile), auth, 0o644)
}

// mkSecretDir makes a fresh 0700 directory for secrets at path, replacing
// a leftover one no registry entry points to (a run that crashed before
// its commit).
func mkSecretDir(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	return os.MkdirAll(path, 0o700)
}

// InitOptions say what Init makes.
type InitOptions struct {
	// Coordinator names the coordinator's identity (default
	// "coordinator"); Admins the operators' (default ["admin"]).
	Coordinator string
	Admins      []string
	// ModelKey names the first model-signing key (default "model-1").
	ModelKey string
}

// Init creates a fleet: the coordinator's and the admins' NKeys, the
// first model-signing key (quant.GenerateKey, as 'edgectl model keygen'
// makes it), the registry and the authorization block.
func (d Dir) Init(o InitOptions) (*Fleet, error) {
	if o.Coordinator == "" {
		o.Coordinator = "coordinator"
	}
	if len(o.Admins) == 0 {
		o.Admins = []string{"admin"}
	}
	if o.ModelKey == "" {
		o.ModelKey = "model-1"
	}
	// Secrets without a registry are a fleet that lost its fleet.json (or
	// a copy gone wrong): never replace them, the model-signing keys among
	// them cannot be made again.
	if ents, err := os.ReadDir(d.p("secrets", "coordinator")); err == nil && len(ents) > 0 {
		if _, err := os.Stat(d.p(FleetFile)); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s holds coordinator secrets but no %s: refusing to overwrite them (restore the registry, or move the secrets away to start a new fleet)",
				ErrExists, d.p("secrets", "coordinator"), FleetFile)
		}
	}
	return d.update(true, func(f *Fleet) error {
		now := d.now()
		if err := mkSecretDir(d.p("secrets", "coordinator")); err != nil {
			return err
		}
		nk, err := d.newIdentity(o.Coordinator, d.CoordinatorSeed(), now)
		if err != nil {
			return err
		}
		f.Coordinator = nk
		for _, a := range o.Admins {
			if err := mkSecretDir(d.p("secrets", "admins", a)); err != nil {
				return err
			}
			id, err := d.newIdentity(a, d.AdminSeed(a), now)
			if err != nil {
				return err
			}
			f.Admins = append(f.Admins, *id)
		}
		k, err := d.newModelKey(o.ModelKey, now)
		if err != nil {
			return err
		}
		f.ModelKeys, f.Signing = append(f.ModelKeys, *k), k.Name
		return nil
	})
}

func (d Dir) newIdentity(name, seedPath string, now time.Time) (*Identity, error) {
	if !federated.ValidSite(name) {
		return nil, fmt.Errorf("%w: name %q is not a DNS label", ErrIdentity, name)
	}
	kp, err := NewUserKey(d.rand())
	if err != nil {
		return nil, err
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	if err := WriteSeedFile(seedPath, kp); err != nil {
		return nil, err
	}
	return &Identity{Name: name, NKey: pub, Created: now}, nil
}

// newModelKey makes a model-signing key pair in the coordinator's secrets
// and copies its public key into the trust directory.
func (d Dir) newModelKey(name string, now time.Time) (*ModelKey, error) {
	if !federated.ValidSite(name) {
		return nil, fmt.Errorf("%w: model key name %q is not a DNS label", ErrIdentity, name)
	}
	if err := os.MkdirAll(d.p("secrets", "coordinator"), 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d.p(ModelKeysDir), 0o755); err != nil {
		return nil, err
	}
	s, _, err := quant.GenerateKey(d.rand())
	if err != nil {
		return nil, err
	}
	_ = os.Remove(d.ModelKeyFile(name)) // a leftover of a crashed run: the registry does not know it
	_, pub, err := quant.WriteKeyPair(d.p("secrets", "coordinator"), name, s)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(pub)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(d.p(ModelKeysDir, name+".pub"), b, 0o644); err != nil {
		return nil, err
	}
	if err := os.Remove(pub); err != nil {
		return nil, err
	}
	return &ModelKey{Name: name, ID: s.ID, Created: now}, nil
}

// SiteCredentials are the files made for a new site.
type SiteCredentials struct {
	Site Site
	// Dir holds Seed and UpdateKey (ship both to the site, mode 0600).
	Dir, Seed, UpdateKey string
	// UpdatePub is the update key's public half in the coordinator's site
	// directory.
	UpdatePub string
	// Permissions are the site's NATS permissions; Snippet its user entry
	// in the server's authorization block.
	Permissions Permissions
	Snippet     []byte
	// Region is the site's region's identity when the site has one;
	// RegionSeed that region's NKey seed when it was made for this site
	// (the region's first), "" when it existed. RegionSnippet is the
	// region's user entry, which now covers the site.
	Region        *Identity
	RegionSeed    string
	RegionSnippet []byte
}

// CreateSite makes a site's credentials: an NKey (NATS identity) and an
// ed25519 update-signing key (quant, separate from the NKey so either can
// be replaced alone), registers the update key with the coordinator's
// site directory and adds the site's user to the authorization block.
func (d Dir) CreateSite(name string) (*SiteCredentials, error) { return d.CreateRegionalSite(name, "") }

// CreateRegionalSite is CreateSite for a site of region (a regional
// aggregator's; "": none): the region's NKey identity is made with its
// first site, and its NATS user's permissions cover its sites
// (RegionPermissions).
func (d Dir) CreateRegionalSite(name, region string) (*SiteCredentials, error) {
	if !federated.ValidSite(name) {
		return nil, fmt.Errorf("%w: site %q is not a DNS label", ErrIdentity, name)
	}
	if region != "" && !federated.ValidSite(region) {
		return nil, fmt.Errorf("%w: region %q is not a DNS label", ErrIdentity, region)
	}
	out := &SiteCredentials{Dir: d.SiteSecrets(name)}
	out.Seed, out.UpdateKey = filepath.Join(out.Dir, SeedFileName), filepath.Join(out.Dir, name+".key")
	out.UpdatePub = d.p(SitesDir, name+".pub")
	f, err := d.update(false, func(f *Fleet) error {
		if s := f.Site(name); s != nil {
			if s.Revoked != nil {
				return fmt.Errorf("%w: site %q was revoked on %s; a revoked name is not reused (pick another)", ErrExists, name, s.Revoked.Format(time.RFC3339))
			}
			return fmt.Errorf("%w: site %q", ErrExists, name)
		}
		if err := mkSecretDir(out.Dir); err != nil {
			return err
		}
		now := d.now()
		id, err := d.newIdentity(name, out.Seed, now)
		if err != nil {
			return err
		}
		s, _, err := quant.GenerateKey(d.rand())
		if err != nil {
			return err
		}
		_, pub, err := quant.WriteKeyPair(out.Dir, name, s)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(pub)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(d.p(SitesDir), 0o755); err != nil {
			return err
		}
		if err := atomicfile.Write(out.UpdatePub, b, 0o644); err != nil {
			return err
		}
		if region != "" && f.Region(region) == nil {
			if err := mkSecretDir(filepath.Dir(d.RegionSeed(region))); err != nil {
				return err
			}
			rid, err := d.newIdentity(region, d.RegionSeed(region), now)
			if err != nil {
				return err
			}
			f.Regions = append(f.Regions, *rid)
			out.RegionSeed = d.RegionSeed(region)
		}
		f.Sites = append(f.Sites, Site{Identity: *id, UpdateKey: s.ID, Region: region})
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Site = *f.Site(name)
	if out.Permissions, err = SitePermissions(name); err != nil {
		return nil, err
	}
	w := &confWriter{}
	w.user("site "+name, out.Site.NKey, out.Permissions)
	out.Snippet = w.b.Bytes()
	if region != "" {
		out.Region = f.Region(region)
		p, err := RegionPermissions(region, f.RegionSites(region))
		if err != nil {
			return nil, err
		}
		w := &confWriter{}
		w.user("region "+region, out.Region.NKey, p)
		out.RegionSnippet = w.b.Bytes()
	}
	return out, nil
}

// RevokeSite revokes a site: its NATS user leaves the authorization block
// (it cannot connect once the server reloads it) and its update key
// leaves the coordinator's site directory (its updates are refused as
// unknown_site once the coordinator restarts). Revoking twice is a no-op
// that repairs the derived files.
func (d Dir) RevokeSite(name string) (*Site, error) {
	f, err := d.update(false, func(f *Fleet) error {
		s := f.Site(name)
		if s == nil {
			return fmt.Errorf("%w: no site %q in the registry", ErrIdentity, name)
		}
		if s.Revoked == nil {
			now := d.now()
			s.Revoked = &now
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f.Site(name), nil
}

// RotateModelKey makes a new model-signing key and makes it the signing
// one; the previous keys stay trusted until RetireModelKey.
func (d Dir) RotateModelKey(name string) (*ModelKey, *Fleet, error) {
	var k *ModelKey
	f, err := d.update(false, func(f *Fleet) error {
		if name == "" {
			name = fmt.Sprintf("model-%d", len(f.ModelKeys)+1)
		}
		if f.ModelKey(name) != nil {
			return fmt.Errorf("%w: model key %q", ErrExists, name)
		}
		var err error
		if k, err = d.newModelKey(name, d.now()); err != nil {
			return err
		}
		f.ModelKeys, f.Signing = append(f.ModelKeys, *k), k.Name
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return f.ModelKey(k.Name), f, nil
}

// RetireModelKey retires a model-signing key (by name or ID): its public
// key file becomes NAME.retired, so every keyring loaded from the trust
// directory refuses artifacts it signed, and its private key is deleted.
// The signing key cannot be retired (rotate first).
func (d Dir) RetireModelKey(nameOrID string) (*ModelKey, error) {
	var name string
	f, err := d.update(false, func(f *Fleet) error {
		k := f.ModelKey(nameOrID)
		if k == nil {
			return fmt.Errorf("%w: no model key %q", ErrIdentity, nameOrID)
		}
		if k.Name == f.Signing {
			return fmt.Errorf("%w: %q is the signing key: rotate to a new key first ('edgectl auth model-key rotate')", ErrIdentity, k.Name)
		}
		if k.Retired == nil {
			now := d.now()
			k.Retired = &now
		}
		name = k.Name
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f.ModelKey(name), nil
}

// WriteServerConfig writes nats/nats-server.conf (and the authorization
// block it includes) for the fleet and returns its path.
func (d Dir) WriteServerConfig(o ServerOptions) (string, error) {
	unlock, err := d.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	f, err := d.Load()
	if err != nil {
		return "", err
	}
	if err := d.reconcile(f); err != nil {
		return "", err
	}
	if o.AuthInclude != "" && o.AuthInclude != filepath.Base(AuthConfFile) {
		return "", fmt.Errorf("%w: AuthInclude %q: the fleet directory's block is %s", ErrServerConfig, o.AuthInclude, filepath.Base(AuthConfFile))
	}
	b, err := RenderServer(f, o)
	if err != nil {
		return "", err
	}
	path := d.p(ServerConfFile)
	return path, atomicfile.Write(path, b, 0o644)
}
