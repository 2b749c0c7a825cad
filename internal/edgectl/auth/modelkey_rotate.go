package auth

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
)

func newAuthModelKeyRotateCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Make a new model-signing key; the old one stays trusted until retired",
		Long: `rotate makes a new model-signing key pair (as 'edgectl model keygen' does)
in the coordinator's secrets, adds its public key to the trust directory
(models/) and records it as the signing key. The previous keys stay
trusted, so models signed before the switch keep loading. The rotation
(docs/security.md):

  1. edgectl auth model-key rotate
  2. give every agent and scheduler the new trust directory (both keys)
  3. restart edge-coordinator with --key <new .key> --model-keys <models/>
  4. edgectl model rollback <current version>   (re-signs it as the next version)
  5. wait until 'edgectl sites' shows every site on that version
  6. edgectl auth model-key retire <old>, and ship the trust directory again`,
		Example: `  edgectl auth model-key rotate --dir fleet`,
		Args:    cobra.NoArgs,
	}
	dir := fleetDir(cmd)
	cmd.Flags().StringVar(&name, "name", "", "name of the new key (default model-N)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		d := dir()
		k, f, err := d.RotateModelKey(name)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "model key %s  %s  private %s\n", k.Name, k.ID, d.ModelKeyFile(k.Name))
		fmt.Fprintln(w, "trusted:")
		for _, m := range f.ModelKeys {
			if m.Retired == nil {
				fmt.Fprintf(w, "  %s  %s\n", m.Name, m.ID)
			}
		}
		fmt.Fprintf(w, "\nnext: ship %s to every agent and scheduler; restart edge-coordinator with --key %s --model-keys %s;\n"+
			"      edgectl model rollback <current version>; when every site runs it: edgectl auth model-key retire <old>\n",
			d.File(natsauth.ModelKeysDir), d.ModelKeyFile(k.Name), d.File(natsauth.ModelKeysDir))
		return nil
	}
	return cmd
}
