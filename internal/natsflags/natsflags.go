package natsflags

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/boundedio"
)

// Environment variables, as the nats CLI reads them.
const (
	EnvURL     = "NATS_URL"
	EnvContext = "NATS_CONTEXT"
	EnvCreds   = "NATS_CREDS"
	EnvNKey    = "NATS_NKEY"
	EnvCA      = "NATS_CA"
	EnvCert    = "NATS_CERT"
	EnvKey     = "NATS_KEY"
)

// ErrContext wraps the refusals of a nats context.
var ErrContext = errors.New("natsflags: nats context")

// Options are what a program decides about its connection flags. The
// zero value: no default server, the NATS default inbox, no selected
// context, no legacy environment.
type Options struct {
	// DefaultServer is the server when no flag, variable or context
	// names one ("" leaves Resolve's URL empty: a required flag).
	DefaultServer string
	// Inbox is --inbox-prefix's default, the identity's reply prefix.
	Inbox string
	// UseSelected lets the nats CLI's selected context apply when no
	// --context or $NATS_CONTEXT names one (edgectl, an operator's tool;
	// not a daemon, which must not change with the home it runs under).
	UseSelected bool
	// LegacyEnv maps the names above (EnvURL, EnvNKey, EnvCA) to a
	// program's former variables, read after the new ones (deprecated).
	LegacyEnv map[string]string
	// LegacyServerFlag registers --nats, the daemons' former name of
	// --server, as a deprecated alias.
	LegacyServerFlag bool
}

// Flags are the parsed connection flags.
type Flags struct {
	opts Options
	vals map[string]*value
}

// the settings and their flag names, as the nats CLI names them
const (
	fServer  = "server"
	fContext = "context"
	fCreds   = "creds"
	fNKey    = "nkey"
	fCA      = "tlsca"
	fCert    = "tlscert"
	fKey     = "tlskey"
	fInbox   = "inbox-prefix"
)

// deprecated aliases: old name -> new name
var aliases = map[string]string{"nats": fServer, "tls-ca": fCA, "tls-cert": fCert, "tls-key": fKey}

// flagSpec is one flag: its name, shorthand, environment and usage.
type flagSpec struct {
	name, short, env, usage string
}

func specs(o Options) []flagSpec {
	server := "NATS server URL (comma-separated for a cluster; default $" + EnvURL + ", then the context's"
	if o.DefaultServer != "" {
		server += ", then " + o.DefaultServer
	}
	server += ")"
	return []flagSpec{
		{fServer, "s", EnvURL, server},
		{fContext, "", EnvContext, "nats CLI context to connect with (~/.config/nats/context/NAME.json; default $" + EnvContext + ")"},
		{fCreds, "", EnvCreds, "NATS credentials file (user JWT and seed) instead of --nkey (default $" + EnvCreds + ")"},
		{fNKey, "", EnvNKey, "NATS NKey seed file of this identity, mode 0600 (edgectl auth; default $" + EnvNKey + ")"},
		{fCA, "", EnvCA, "CA bundle (PEM) that verifies the NATS server; turns TLS on (default $" + EnvCA + ")"},
		{fCert, "", EnvCert, "client certificate (PEM) for mutual TLS (default $" + EnvCert + ")"},
		{fKey, "", EnvKey, "client certificate's private key (PEM) (default $" + EnvKey + ")"},
		{fInbox, "", "", "reply-subject prefix; must match this identity's NATS permissions"},
	}
}

// value is one flag's value, remembering whether it was given.
type value struct {
	s   string
	set bool
	// target is the flag a deprecated alias writes to (nil for a flag
	// itself)
	target *value
}

func (v *value) String() string {
	if v == nil {
		return ""
	}
	if v.target != nil {
		return v.target.s
	}
	return v.s
}

func (v *value) Set(s string) error {
	if v.target != nil {
		return v.target.Set(s)
	}
	v.s, v.set = s, true
	return nil
}

func (v *value) Type() string { return "string" }

func newFlags(o Options) *Flags {
	f := &Flags{opts: o, vals: map[string]*value{}}
	for _, s := range specs(o) {
		f.vals[s.name] = &value{}
	}
	f.vals[fInbox].s = o.Inbox
	return f
}

// AddPFlags registers the flags on a pflag set, -s the shorthand of
// --server; the deprecated aliases are hidden and warn (pflag's
// deprecation, on the flag set's output).
func AddPFlags(fs *pflag.FlagSet, o Options) *Flags {
	f := newFlags(o)
	for _, s := range specs(o) {
		fs.VarP(f.vals[s.name], s.name, s.short, s.usage)
	}
	for old, name := range aliases {
		if name == fServer && !o.LegacyServerFlag {
			continue // edgectl never had --nats
		}
		fs.Var(&value{target: f.vals[name]}, old, "deprecated: use --"+name)
		_ = fs.MarkDeprecated(old, "use --"+name+" instead")
	}
	return f
}

// Set reports whether the flag name (a setting's name: "server", "nkey",
// ...) was given on the command line, directly or through an alias.
func (f *Flags) Set(name string) bool {
	v := f.vals[name]
	return v != nil && v.set
}

// Names are the flag names the package registers, the aliases included
// (to tell a program's own flags from the connection's).
func Names() []string {
	var out []string
	for _, s := range specs(Options{}) {
		out = append(out, s.name)
		if s.short != "" {
			out = append(out, s.short)
		}
	}
	for old := range aliases {
		out = append(out, old)
	}
	return out
}

// Conn is a resolved connection: the server URL and the client config.
type Conn struct {
	URL     string
	Config  natsauth.ClientConfig
	Context string // the nats context used, "" for none
}

// Resolve combines the flags, the environment (getenv; nil: os.Getenv)
// and the context into the connection (package doc: the order).
func (f *Flags) Resolve(getenv func(string) string) (Conn, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	get := func(name, env string) string {
		if v := f.vals[name]; v.set {
			return v.s
		}
		if env == "" {
			return ""
		}
		if s := getenv(env); s != "" {
			return s
		}
		return ""
	}
	var c Conn
	name := get(fContext, EnvContext)
	var nctx *natsContext
	if name != "" || f.opts.UseSelected {
		var err error
		if nctx, name, err = loadContext(name, getenv); err != nil {
			return Conn{}, err
		}
		c.Context = name
	}
	pick := func(flagName, env string, fromCtx func(*natsContext) string) string {
		if s := get(flagName, env); s != "" {
			return s
		}
		if nctx != nil {
			if s := fromCtx(nctx); s != "" {
				return s
			}
		}
		if legacy := f.opts.LegacyEnv[env]; legacy != "" {
			return getenv(legacy)
		}
		return ""
	}
	c.URL = pick(fServer, EnvURL, func(n *natsContext) string { return n.URL })
	if c.URL == "" {
		c.URL = f.opts.DefaultServer
	}
	c.Config.CredsFile = pick(fCreds, EnvCreds, func(n *natsContext) string { return n.Creds })
	c.Config.NKeySeedFile = pick(fNKey, EnvNKey, func(n *natsContext) string { return n.NKey })
	c.Config.CAFile = pick(fCA, EnvCA, func(n *natsContext) string { return n.CA })
	c.Config.CertFile = pick(fCert, EnvCert, func(n *natsContext) string { return n.Cert })
	c.Config.KeyFile = pick(fKey, EnvKey, func(n *natsContext) string { return n.Key })
	c.Config.InboxPrefix = f.vals[fInbox].s
	if !f.vals[fInbox].set && nctx != nil && nctx.InboxPrefix != "" {
		c.Config.InboxPrefix = nctx.InboxPrefix
	}
	// an explicit --creds or --nkey wins over the other kind from a
	// context or the environment
	switch {
	case f.Set(fCreds) && !f.Set(fNKey):
		c.Config.NKeySeedFile = ""
	case f.Set(fNKey) && !f.Set(fCreds):
		c.Config.CredsFile = ""
	}
	if err := c.Config.Validate(); err != nil {
		return Conn{}, err
	}
	return c, nil
}

// configRoot is where the nats CLI keeps its configuration:
// $XDG_CONFIG_HOME, else $HOME/.config.
func configRoot(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return x, nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("%w: no home directory to read contexts from: %v", ErrContext, err)
		}
	}
	return filepath.Join(home, ".config"), nil
}

// natsContext is the part of a nats CLI context file edgesched reads
// (the format of github.com/nats-io/jsm.go/natscontext, which edgesched
// does not link: it brings the NATS server's packages into edge-agent).
type natsContext struct {
	URL         string `json:"url"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	InboxPrefix string `json:"inbox_prefix"`
	// refused: authentication edgesched identities do not use
	User    string `json:"user"`
	Token   string `json:"token"`
	UserJWT string `json:"user_jwt"`
	NSC     string `json:"nsc"`
}

// maxContextBytes bounds a context file (the nats CLI's are a few
// hundred bytes).
const maxContextBytes = 64 << 10

// validContextName is the nats CLI's rule: no path separators, no "..".
func validContextName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/\\") && !strings.Contains(name, "..")
}

// loadContext loads the named context, or the selected one when name is
// "" (none selected: nil, no error). Paths in it are expanded as the nats
// CLI expands them (~ and $VAR).
func loadContext(name string, getenv func(string) string) (*natsContext, string, error) {
	root, err := configRoot(getenv)
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(root, "nats", "context")
	if name == "" {
		b, err := boundedio.ReadFile(context.Background(), filepath.Join(root, "nats", "context.txt"), 4096)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return nil, "", nil // the nats CLI has none selected
		}
		name = strings.TrimSpace(string(b))
	}
	if !validContextName(name) {
		return nil, "", fmt.Errorf("%w %q: not a context name", ErrContext, name)
	}
	b, err := boundedio.ReadFile(context.Background(), filepath.Join(dir, name+".json"), maxContextBytes)
	if err != nil {
		return nil, "", fmt.Errorf("%w %q (in %s): %v", ErrContext, name, dir, err)
	}
	var c natsContext
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, "", fmt.Errorf("%w %q (%s): %v", ErrContext, name, filepath.Join(dir, name+".json"), err)
	}
	if c.User != "" || c.Token != "" || c.UserJWT != "" || c.NSC != "" {
		return nil, "", fmt.Errorf("%w %q: user/password, token, inline JWT and nsc authentication are not supported; edgesched identities are NKeys (--nkey) or credentials files (--creds)", ErrContext, name)
	}
	home := getenv("HOME")
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		*p = expandPath(strings.TrimPrefix(*p, "file://"), home, getenv)
	}
	return &c, name, nil
}

// expandPath expands a leading ~ and $VAR as the nats CLI does.
func expandPath(p, home string, getenv func(string) string) string {
	if p == "" {
		return ""
	}
	if home != "" && (p == "~" || strings.HasPrefix(p, "~/")) {
		p = home + p[1:]
	}
	return os.Expand(p, getenv)
}
