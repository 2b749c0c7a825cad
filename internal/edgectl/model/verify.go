package model

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/quant"
)

func newModelVerifyCommand() *cobra.Command {
	var keys []string
	var current string
	cmd := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check an artifact's signature, schema and (with --current) that its version increases",
		Long: `verify decodes FILE as a loader would: the signature must verify against
--model-keys, the content must be well formed and match this build's feature
schema, and with --current the version must be above the running model's
(rollback protection). It exits non-zero with the reason otherwise.`,
		Example: `  edgectl model verify default-int8.esa --model-keys keys/
  edgectl model verify next.esa --model-keys keys/ --current running.esa`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keys) == 0 {
				return cli.Usagef("--model-keys: required (public keys the artifact may be signed with)")
			}
			opt, err := cmdutil.DecodeOptions(keys, false)
			if err != nil {
				return err
			}
			a, err := quant.ReadFile(args[0], opt)
			if err != nil {
				return err
			}
			if current != "" {
				cur, err := quant.ReadFile(current, opt)
				if err != nil {
					return fmt.Errorf("--current: %w", err)
				}
				if err := quant.CheckNewer(&cur.Header, &a.Header); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok: %s model %s version %d, signed by %s, schema %s\n", args[0], a.Header.DType, a.Header.ModelID[:12], a.Header.Version, a.KeyID, a.Header.SchemaID)
			return nil
		},
	}
	cmdutil.AddModelKeysFlag(cmd.Flags(), &keys, "; required")
	cmd.Flags().StringVar(&current, "current", "", "the running model's artifact: refuse FILE unless its version is higher")
	return cmd
}
