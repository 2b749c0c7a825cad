package auth

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/cli"
)

func newAuthTLSCommand() *cobra.Command {
	var o natsauth.DevPKIOptions
	var out string
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make a throwaway CA, a server certificate and client certificates",
		Long: `tls makes a small PKI for tests, demos and first deployments: a CA
(ca.pem; its private key is not kept, so nothing more can be issued from
it), a server certificate for --host names and addresses, and with
--client a client certificate per name for mutual TLS. Production fleets
should issue certificates from their own CA (cert-manager, step-ca, ...).`,
		Example: `  edgectl auth tls --out fleet/tls --host nats.example.com --host 10.0.0.5 --client coordinator --client store-1`,
		Args:    cobra.NoArgs,
	}
	cmd.Flags().StringVar(&out, "out", "tls", "directory for the files")
	cmd.Flags().StringSliceVar(&o.Hosts, "host", nil, "server DNS name or IP (repeat); required")
	cmd.Flags().StringSliceVar(&o.Clients, "client", nil, "client certificate name (repeat)")
	cmd.Flags().DurationVar(&o.Valid, "valid", 0, "validity (default one year)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(o.Hosts) == 0 {
			return cli.Usagef("--host: required (the server's DNS name or IP; repeat for more)")
		}
		p, err := natsauth.DevPKI(out, o)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "CA      %s\nserver  %s  key %s\n", p.CA, p.ServerCert, p.ServerKey)
		names := make([]string, 0, len(p.ClientCerts))
		for n := range p.ClientCerts {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(w, "client  %s  key %s\n", p.ClientCerts[n], p.ClientKeys[n])
		}
		return nil
	}
	return cmd
}
