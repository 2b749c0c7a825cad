package model

import (
	"crypto/rand"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/quant"
)

func newModelKeygenCommand() *cobra.Command {
	var dir, name string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make an ed25519 signing key pair (NAME.key, mode 0600, and NAME.pub)",
		Example: `  edgectl model keygen --dir keys --name coordinator
  edgectl model sign default --key keys/coordinator.key --out default.esa`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return cli.Usagef("--name: required")
			}
			if name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
				// NAME.key is written in --dir, never elsewhere
				return cli.Usagef("--name %q: a file name, not a path (the directory is --dir)", name)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("--dir: %w", err)
			}
			s, _, err := quant.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			priv, pub, err := quant.WriteKeyPair(dir, name, s)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "key %s\nprivate %s (keep it secret)\npublic  %s (give it to loaders: --model-keys)\n", s.ID, priv, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory for the key files")
	cmd.Flags().StringVar(&name, "name", "", "key name (files NAME.key and NAME.pub); required")
	return cmd
}
