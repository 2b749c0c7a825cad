package auth

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
)

func newAuthInitCommand() *cobra.Command {
	var o natsauth.InitOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a fleet directory: coordinator and operator NKeys, the first model-signing key",
		Long: `init creates the fleet directory: an NKey for the coordinator and one per
operator (--admin), the first model-signing key (an ed25519 key pair, the
same kind 'edgectl model keygen' makes), the registry and the NATS
authorization block. It refuses an initialised directory.`,
		Example: `  edgectl auth init --dir fleet
  edgectl auth init --dir fleet --admin alice --admin bob`,
		Args: cobra.NoArgs,
	}
	dir := fleetDir(cmd)
	cmd.Flags().StringVar(&o.Coordinator, "coordinator", "coordinator", "name of the coordinator's identity")
	cmd.Flags().StringSliceVar(&o.Admins, "admin", []string{"admin"}, "operator identities (repeat or comma-separate)")
	cmd.Flags().StringVar(&o.ModelKey, "model-key", "model-1", "name of the first model-signing key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		d := dir()
		f, err := d.Init(o)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		k := f.ModelKey(f.Signing)
		fmt.Fprintf(w, "fleet %s\n", d.Path)
		fmt.Fprintf(w, "coordinator  %s  nkey %s  seed %s\n", f.Coordinator.Name, f.Coordinator.NKey, d.CoordinatorSeed())
		for _, a := range f.Admins {
			fmt.Fprintf(w, "admin        %s  nkey %s  seed %s\n", a.Name, a.NKey, d.AdminSeed(a.Name))
		}
		fmt.Fprintf(w, "model key    %s  %s  private %s (edge-coordinator --key)\n", k.Name, k.ID, d.ModelKeyFile(k.Name))
		fmt.Fprintf(w, "trust        %s (agents' and the scheduler plugin's model keys)\n", d.File(natsauth.ModelKeysDir))
		fmt.Fprintf(w, "\nnext: edgectl auth site create NAME; edgectl auth config --tls-cert ... to write the server configuration\n")
		return nil
	}
	return cmd
}
