package auth

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/quant"
)

func newAuthModelKeyRetireCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retire NAME|KEYID",
		Short: "Retire an old model-signing key: artifacts it signed are refused",
		Long: `retire renames the key's NAME.pub in the trust directory to NAME.retired
and deletes its private key. Agents and scheduler plugins that load the
trust directory refuse every artifact that key signed, even with a stale
copy of its .pub around (reason retired_key). The signing key cannot be
retired: rotate first.`,
		Example: `  edgectl auth model-key retire model-1 --dir fleet`,
		Args:    cobra.ExactArgs(1),
	}
	dir := fleetDir(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		d := dir()
		k, err := d.RetireModelKey(args[0])
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "model key %s (%s) retired at %s: %s%s; private key deleted\n", k.Name, k.ID, stamp(k.Retired),
			d.File(natsauth.ModelKeysDir+"/"+k.Name), quant.RetiredSuffix)
		fmt.Fprintf(w, "\nnext: ship %s to every agent and scheduler and restart them (or let them reload it)\n", d.File(natsauth.ModelKeysDir))
		return nil
	}
	return cmd
}
