package natsflags

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/edgesched/edgesched/federated/natsauth"
)

// writeContext writes a nats CLI context file under root/nats/context.
func writeContext(t *testing.T, root, name, body string) {
	t.Helper()
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// parseFlags registers the flags on a pflag set and parses args; it
// returns the flags and what the set printed (deprecation warnings).
func parseFlags(t *testing.T, o Options, args ...string) (*Flags, string) {
	t.Helper()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	f := AddPFlags(fs, o)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return f, out.String()
}

// TestResolve: each setting comes from its flag, else its variable, else
// the context, else the default (docs/cli.md, "NATS connection").
func TestResolve(t *testing.T) {
	root := t.TempDir()
	writeContext(t, root, "cloud", `{"description":"the fleet","url":"tls://ctx.example:4222","nkey":"/ctx/op.nk","ca":"/ctx/ca.pem","inbox_prefix":"_INBOX_ctx"}`)
	writeContext(t, root, "other", `{"url":"nats://other:4222"}`)
	if err := os.WriteFile(filepath.Join(root, "nats", "context.txt"), []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) string {
		m := map[string]string{"XDG_CONFIG_HOME": root}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	daemon := Options{DefaultServer: nats.DefaultURL, Inbox: "_INBOX_d", LegacyServerFlag: true}
	tool := Options{DefaultServer: nats.DefaultURL, UseSelected: true, LegacyEnv: map[string]string{EnvURL: "EDGESCHED_NATS"}}
	cases := []struct {
		name    string
		opts    Options
		args    []string
		env     func(string) string
		url     string
		nkey    string
		ca      string
		inbox   string
		context string
	}{
		{"defaults", daemon, nil, env(), nats.DefaultURL, "", "", "_INBOX_d", ""},
		{"-s", daemon, []string{"-s", "nats://a:1"}, env(), "nats://a:1", "", "", "_INBOX_d", ""},
		{"--server", daemon, []string{"--server=nats://a:1"}, env(), "nats://a:1", "", "", "_INBOX_d", ""},
		{"NATS_URL", daemon, nil, env(EnvURL, "nats://env:1"), "nats://env:1", "", "", "_INBOX_d", ""},
		{"the flag over NATS_URL", daemon, []string{"-s", "nats://a:1"}, env(EnvURL, "nats://env:1"), "nats://a:1", "", "", "_INBOX_d", ""},
		{"--context", daemon, []string{"--context", "cloud"}, env(), "tls://ctx.example:4222", "/ctx/op.nk", "/ctx/ca.pem", "_INBOX_ctx", "cloud"},
		{"NATS_CONTEXT", daemon, nil, env(EnvContext, "cloud"), "tls://ctx.example:4222", "/ctx/op.nk", "/ctx/ca.pem", "_INBOX_ctx", "cloud"},
		{"flags and variables over the context", daemon, []string{"--context", "cloud", "--nkey", "/flag.nk", "--inbox-prefix", "_INBOX_f"}, env(EnvURL, "nats://env:1", EnvCA, "/env/ca.pem"),
			"nats://env:1", "/flag.nk", "/env/ca.pem", "_INBOX_f", "cloud"},
		// a daemon ignores the nats CLI's selected context; edgectl uses it
		{"selected, daemon", daemon, nil, env(), nats.DefaultURL, "", "", "_INBOX_d", ""},
		{"selected, edgectl", tool, nil, env(), "nats://other:4222", "", "", "", "other"},
		{"the legacy variable last", tool, []string{"--context", "cloud"}, env("EDGESCHED_NATS", "nats://old:1"), "tls://ctx.example:4222", "/ctx/op.nk", "/ctx/ca.pem", "_INBOX_ctx", "cloud"},
		{"the legacy variable without a context", Options{DefaultServer: nats.DefaultURL, LegacyEnv: tool.LegacyEnv}, nil, env("EDGESCHED_NATS", "nats://old:1"), "nats://old:1", "", "", "", ""},
		{"--nats (deprecated)", daemon, []string{"--nats", "nats://old-flag:1"}, env(EnvURL, "nats://env:1"), "nats://old-flag:1", "", "", "_INBOX_d", ""},
		{"--tls-ca (deprecated)", daemon, []string{"--tls-ca", "/old/ca.pem"}, env(), nats.DefaultURL, "", "/old/ca.pem", "_INBOX_d", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, warn := parseFlags(t, tc.opts, tc.args...)
			c, err := f.Resolve(tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.URL != tc.url || c.Config.NKeySeedFile != tc.nkey || c.Config.CAFile != tc.ca || c.Config.InboxPrefix != tc.inbox || c.Context != tc.context {
				t.Fatalf("got url %q nkey %q ca %q inbox %q context %q\nwant url %q nkey %q ca %q inbox %q context %q",
					c.URL, c.Config.NKeySeedFile, c.Config.CAFile, c.Config.InboxPrefix, c.Context, tc.url, tc.nkey, tc.ca, tc.inbox, tc.context)
			}
			deprecated := strings.HasPrefix(tc.name, "--nats") || strings.HasPrefix(tc.name, "--tls-ca")
			if got := strings.Contains(warn, "has been deprecated, use --"); got != deprecated {
				t.Fatalf("deprecation warning %v, want %v: %q", got, deprecated, warn)
			}
		})
	}
}

// TestContextFromHome reads a context the way the nats CLI writes it,
// under $HOME/.config when XDG_CONFIG_HOME is unset, through the real
// environment.
func TestContextFromHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv(EnvURL, "")
	t.Setenv(EnvContext, "")
	writeContext(t, filepath.Join(home, ".config"), "lab", `{"url":"nats://lab:4222","creds":"file:///etc/lab.creds"}`)
	fs := pflag.NewFlagSet("edgectl", pflag.ContinueOnError)
	f := AddPFlags(fs, Options{DefaultServer: nats.DefaultURL})
	if err := fs.Parse([]string{"--context", "lab"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://lab:4222" || c.Config.CredsFile != "/etc/lab.creds" || c.Context != "lab" {
		t.Fatalf("%+v", c)
	}
}

func TestResolveErrors(t *testing.T) {
	root := t.TempDir()
	writeContext(t, root, "userpass", `{"url":"nats://x:1","user":"a","password":"b"}`)
	writeContext(t, root, "broken", `{"url":`)
	env := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return root
		}
		return ""
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--context", "missing"}, `nats context "missing" (in ` + filepath.Join(root, "nats", "context")},
		{[]string{"--context", "broken"}, `nats context "broken"`},
		{[]string{"--context", "userpass"}, "user/password, token, inline JWT and nsc authentication are not supported"},
		{[]string{"--tlscert", "c.pem"}, "a client certificate needs both the certificate and its key"},
		{[]string{"--nkey", "a", "--creds", "b"}, "mutually exclusive"},
	}
	for _, tc := range cases {
		f, _ := parseFlags(t, Options{}, tc.args...)
		if _, err := f.Resolve(env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		} else if strings.Contains(tc.want, "context") && !errors.Is(err, ErrContext) {
			t.Errorf("%q: %v is not ErrContext", tc.args, err)
		}
	}
}

// TestPFlags: edgectl's flags are the same names, -s the shorthand, the
// deprecated aliases hidden from the help.
func TestPFlags(t *testing.T) {
	fs := pflag.NewFlagSet("edgectl", pflag.ContinueOnError)
	var stderr bytes.Buffer
	fs.SetOutput(&stderr)
	f := AddPFlags(fs, Options{DefaultServer: nats.DefaultURL})
	if err := fs.Parse([]string{"-s", "nats://s:1", "--tls-ca", "/ca.pem", "--tlscert", "c", "--tlskey", "k"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.Resolve(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://s:1" || c.Config.CAFile != "/ca.pem" || c.Config.CertFile != "c" || c.Config.KeyFile != "k" {
		t.Fatalf("%+v", c)
	}
	if !strings.Contains(stderr.String(), "Flag --tls-ca has been deprecated, use --tlsca instead") {
		t.Fatalf("no deprecation warning: %q", stderr.String())
	}
	if usage := fs.FlagUsages(); strings.Contains(usage, "tls-ca") || !strings.Contains(usage, "-s, --server") || strings.Contains(usage, "--nats") {
		t.Fatalf("usage:\n%s", usage)
	}
}

// TestConnectViaNATSURL connects to an embedded server named only by
// $NATS_URL.
func TestConnectViaNATSURL(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	defer srv.Shutdown()
	t.Setenv(EnvURL, srv.ClientURL())
	t.Setenv(EnvContext, "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no context selected
	f, _ := parseFlags(t, Options{DefaultServer: "nats://127.0.0.1:1"})
	c, err := f.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := c.Config.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		t.Fatalf("connect to %s: %v", c.URL, err)
	}
	defer nc.Close()
	if got := nc.ConnectedUrl(); got != srv.ClientURL() {
		t.Fatalf("connected to %s, want %s", got, srv.ClientURL())
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// FuzzContextFile: any bytes in a context file give a connection or an
// error naming the context, never a panic; a context that decodes keeps
// its URL.
func FuzzContextFile(f *testing.F) {
	// as `nats context save` writes them (nats CLI 0.2)
	f.Add([]byte(`{"description":"","url":"nats://127.0.0.1:4222","socks_proxy":"","token":"","user":"","password":"","creds":"","nkey":"/home/op/op.nk","cert":"","key":"","ca":"","nsc":"","jetstream_domain":"","jetstream_api_prefix":"","jetstream_event_prefix":"","inbox_prefix":"","user_jwt":"","color_scheme":"","tls_first":false}`))
	f.Add([]byte(`{"url":"tls://a:4222","creds":"~/x.creds","ca":"$CA_DIR/ca.pem"}`))
	f.Add([]byte(`{"url":`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "nats", "context")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f.json"), body, 0o600); err != nil {
			t.Fatal(err)
		}
		env := func(k string) string {
			switch k {
			case "XDG_CONFIG_HOME":
				return root
			case "HOME":
				return "/home/op"
			}
			return ""
		}
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fl := AddPFlags(fs, Options{DefaultServer: "nats://default:4222"})
		if err := fs.Parse([]string{"--context", "f"}); err != nil {
			t.Fatal(err)
		}
		c, err := fl.Resolve(env)
		if err != nil {
			if !strings.Contains(err.Error(), `"f"`) && !errors.Is(err, natsauth.ErrClientConfig) {
				t.Fatalf("error names neither the context nor the config: %v", err)
			}
			return
		}
		if c.URL == "" || c.Context != "f" {
			t.Fatalf("resolved %+v", c)
		}
	})
}
