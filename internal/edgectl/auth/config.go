package auth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/cli"
)

func newAuthConfigCommand() *cobra.Command {
	o := natsauth.DefaultServerOptions()
	var tlsFiles natsauth.TLSFiles
	var print bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Write the fleet's nats-server configuration (TLS, JetStream, NKey users)",
		Long: `config writes nats/nats-server.conf in the fleet directory: the listener,
JetStream, the payload cap, TLS (server certificate, and with
--tls-verify the CA that client certificates must chain to) and an
include of nats/auth.conf, the authorization block every auth verb keeps
current. Run the server with 'nats-server -c nats/nats-server.conf'.
TLS is required unless --insecure-plaintext (loopback tests only).`,
		Example: `  edgectl auth config --dir fleet --tls-cert /etc/nats/server.pem --tls-key /etc/nats/server-key.pem \
      --tls-ca /etc/nats/ca.pem --tls-verify --store-dir /var/lib/nats/jetstream`,
		Args: cobra.NoArgs,
	}
	dir := fleetDir(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.Name, "server-name", o.Name, "server_name (stable: JetStream needs it)")
	fl.StringVar(&o.Listen, "listen", o.Listen, "client listen address host:port")
	fl.StringVar(&o.StoreDir, "store-dir", o.StoreDir, "JetStream store directory")
	fl.Int64Var(&o.MaxPayload, "max-payload", o.MaxPayload, "largest message in bytes")
	fl.StringVar(&tlsFiles.Cert, "tls-cert", "", "server certificate (PEM)")
	fl.StringVar(&tlsFiles.Key, "tls-key", "", "server private key (PEM)")
	fl.StringVar(&tlsFiles.CA, "tls-ca", "", "CA bundle client certificates must chain to")
	fl.BoolVar(&tlsFiles.VerifyClients, "tls-verify", false, "require client certificates (mutual TLS)")
	fl.BoolVar(&o.AllowPlaintext, "insecure-plaintext", false, "serve without TLS (loopback tests only)")
	fl.BoolVar(&print, "print", false, "also print the configuration")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkServerFlags(&o, &tlsFiles); err != nil {
			return err
		}
		d := dir()
		path, err := d.WriteServerConfig(o)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "wrote %s (includes %s)\n", path, d.File(natsauth.AuthConfFile))
		if print {
			f, err := d.Load()
			if err != nil {
				return err
			}
			b, err := natsauth.RenderServer(f, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\n%s", b)
		}
		return nil
	}
	return cmd
}

// serverFlags names the flag of each natsauth.ServerOptions field its
// Validate names.
var serverFlags = map[string]string{"Name": "--server-name", "Listen": "--listen", "StoreDir": "--store-dir", "MaxPayload": "--max-payload"}

// checkServerFlags checks config's flags before any work, as usage errors
// naming the flags: TLS (--tls-cert and --tls-key) unless
// --insecure-plaintext, which takes no TLS flag; --tls-verify with
// --tls-ca; then what natsauth.ServerOptions.Validate checks, under the
// flags' names rather than its fields'. It sets o.TLS from tlsFiles.
func checkServerFlags(o *natsauth.ServerOptions, tlsFiles *natsauth.TLSFiles) error {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"--tls-cert", tlsFiles.Cert != ""}, {"--tls-key", tlsFiles.Key != ""}, {"--tls-ca", tlsFiles.CA != ""}, {"--tls-verify", tlsFiles.VerifyClients}} {
		if f.on {
			set = append(set, f.name)
		}
	}
	switch {
	case o.AllowPlaintext && len(set) > 0:
		return cli.Usagef("--insecure-plaintext serves without TLS: not with %s", strings.Join(set, " "))
	case o.AllowPlaintext:
	case len(set) == 0:
		return cli.Usagef("--tls-cert and --tls-key: required: sites reach the server over the WAN (--insecure-plaintext serves without TLS, for loopback tests only)")
	case tlsFiles.Cert == "":
		return cli.Usagef("--tls-cert: required with %s (the server certificate, PEM)", strings.Join(set, " "))
	case tlsFiles.Key == "":
		return cli.Usagef("--tls-key: required with %s (the server's private key, PEM)", strings.Join(set, " "))
	case tlsFiles.VerifyClients && tlsFiles.CA == "":
		return cli.Usagef("--tls-verify needs --tls-ca (the CA client certificates must chain to)")
	default:
		o.TLS = tlsFiles
	}
	err := o.Validate()
	if err == nil {
		return nil
	}
	// "natsauth: bad server options: FIELD: why" -> "--flag: why"
	field, why, ok := strings.Cut(strings.TrimPrefix(err.Error(), natsauth.ErrServerConfig.Error()+": "), ": ")
	if flag := serverFlags[field]; ok && flag != "" && errors.Is(err, natsauth.ErrServerConfig) {
		return cli.Usagef("%s: %s", flag, why)
	}
	return cli.Usage(err)
}
