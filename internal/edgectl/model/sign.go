package model

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/quant"
)

func newModelSignCommand() *cobra.Command {
	f := &artifactFlags{}
	cmd := &cobra.Command{
		Use:   "sign MODEL",
		Short: "Package a trained model as a signed float32 artifact",
		Long: `sign writes a float32 artifact (actor and critic: what training and federated
aggregation work on) of MODEL: a shipped model name (default, edge, edge-carbon), a
training output (.esm) or another float32 artifact (.esa, re-signed; give
--model-keys to verify it first).`,
		Example: `  edgectl model sign default --key keys/coordinator.key --out default-f32.esa --version 7
  edgectl model sign out/train/edge/model.esm --key keys/coordinator.key --out edge-f32.esa`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.signer()
			if err != nil {
				return err
			}
			opt, err := cmdutil.DecodeOptions(f.keys, f.allowUnsigned)
			if err != nil {
				return err
			}
			m, id, err := loadFloatModel(args[0], opt)
			if err != nil {
				return err
			}
			parent := f.parent
			if parent == "" {
				parent = id
			}
			a, err := quant.FromModel(m.Float(), quant.Info{Version: f.version, Round: f.round, Parent: parent, Metrics: metricsOf(m), Created: time.Now()})
			if err != nil {
				return err
			}
			if err := quant.WriteFile(f.out, a, s); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: float32 model %s version %d, signed by %s\n", f.out, a.Header.ModelID[:12], a.Header.Version, s.ID)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
