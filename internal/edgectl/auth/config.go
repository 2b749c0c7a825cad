package auth

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
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
		if tlsFiles.Cert != "" || tlsFiles.Key != "" || tlsFiles.CA != "" || tlsFiles.VerifyClients {
			o.TLS = &tlsFiles
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
