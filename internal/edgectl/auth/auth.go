package auth

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
)

// FleetEnv names the environment variable that sets --dir's default for
// the auth verbs.
const FleetEnv = "EDGESCHED_FLEET"

// NewCommand returns edgectl auth and its verbs.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Manage the fleet's identities and keys: NATS NKeys, site keys, model-signing keys",
		Long: `auth keeps a fleet directory (--dir, or $EDGESCHED_FLEET; layout in
docs/security.md): the registry of identities (fleet.json), their secrets
(mode 0600) and what is generated from them: the nats-server
authorization block (NKey users with per-subject permissions), the
coordinator's site directory and the model-signing trust directory.

  init              the coordinator's and operators' NKeys and the first model-signing key
  site create NAME  a site's NKey and update-signing key, and its NATS user
  site list         the registry's sites
  site revoke NAME  remove a site's NATS user and update key
  model-key rotate  a new model-signing key (the old one stays trusted until retired)
  model-key retire  stop trusting an old model-signing key
  config            write the nats-server configuration (TLS, JetStream, users)
  tls               a throwaway CA and certificates for tests and first deployments

After every change, reload the server ('nats-server --signal reload') and
restart edge-coordinator when its site directory changed.`,
	}
	site := &cobra.Command{
		Use:   "site",
		Short: "Create, list and revoke sites' credentials",
	}
	site.AddCommand(newAuthSiteCreateCommand(), newAuthSiteListCommand(), newAuthSiteRevokeCommand())
	mk := &cobra.Command{
		Use:   "model-key",
		Short: "Rotate and retire model-signing keys",
	}
	mk.AddCommand(newAuthModelKeyRotateCommand(), newAuthModelKeyRetireCommand())
	cmd.AddCommand(newAuthInitCommand(), site, mk, newAuthConfigCommand(), newAuthTLSCommand())
	return cmd
}

// fleetDir registers --dir and returns the fleet directory it names.
func fleetDir(cmd *cobra.Command) func() natsauth.Dir {
	def := os.Getenv(FleetEnv)
	if def == "" {
		def = "fleet"
	}
	path := cmd.Flags().String("dir", def, "fleet directory (default from $"+FleetEnv+")")
	return func() natsauth.Dir { return natsauth.Dir{Path: *path} }
}

// reloadHint tells the operator what to do after a change to the fleet.
func reloadHint(w io.Writer, d natsauth.Dir, coordinator bool) {
	fmt.Fprintf(w, "\nnext:\n  reload the NATS server: nats-server --signal reload (it reads %s)\n", d.File(natsauth.AuthConfFile))
	if coordinator {
		fmt.Fprintf(w, "  restart edge-coordinator (--sites %s)\n", d.File(natsauth.SitesDir))
	}
}

func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
