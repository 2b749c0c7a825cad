package auth

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
)

func newAuthSiteRevokeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a site: remove its NATS user and its update key",
		Long: `revoke removes the site's user from the NATS authorization block (after
'nats-server --signal reload' it is disconnected and cannot connect) and
moves its update key from the coordinator's site directory to
sites-revoked/ (after a restart the coordinator refuses its updates as
unknown_site). The registry keeps the site, marked revoked. Revoking
again repairs the derived files.`,
		Example: `  edgectl auth site revoke store-1 --dir fleet`,
		Args:    cobra.ExactArgs(1),
	}
	dir := fleetDir(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		d := dir()
		s, err := d.RevokeSite(args[0])
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "site %s revoked at %s\nnkey %s removed from %s\nupdate key moved to %s\n", s.Name, stamp(s.Revoked), s.NKey,
			d.File(natsauth.AuthConfFile), d.File(natsauth.RevokedDir))
		reloadHint(w, d, true)
		return nil
	}
	return cmd
}
