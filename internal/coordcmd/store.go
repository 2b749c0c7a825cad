package coordcmd

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/quant"
)

// The store's subcommands (docs/federated.md "Backups and a damaged
// store"): backup, check and restore. The running coordinator writes
// online backups itself (--backup-every, and the admin endpoint
// store.backup).

// defaultData is the coordinator's data directory.
const defaultData = "coordinator-data"

// storeCommand is a subcommand with its --data flag (default data).
func storeCommand(use, short, data string) (*cobra.Command, *string) {
	cmd := &cobra.Command{Use: use, Short: short}
	return cmd, cmd.Flags().String("data", data, "data directory (coordinator.db)")
}

// keyringFlags defines --key and --model-keys, the keys the store's
// artifacts are checked against, on cmd; the function it returns loads
// them (keyring).
func keyringFlags(cmd *cobra.Command) func() (*quant.Keyring, error) {
	keyFile := cmd.Flags().String("key", "", "the model-signing private key (required)")
	modelKeys := cmd.Flags().StringSlice("model-keys", nil, "further model-signing public keys (a key rotation): files or directories of *.pub, comma-separated or repeated")
	return func() (*quant.Keyring, error) { return keyring(*keyFile, *modelKeys) }
}

// keyring is the coordinator's public key (from its private key file)
// and the further trusted model keys.
func keyring(keyFile string, modelKeys []string) (*quant.Keyring, error) {
	if keyFile == "" {
		return nil, cli.Usagef("--key is required (the model-signing key: the store's artifacts are checked against it)")
	}
	s, err := quant.ReadSigner(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	k := &quant.Keyring{}
	if len(modelKeys) > 0 {
		if k, err = quant.LoadKeyring(modelKeys...); err != nil {
			return nil, fmt.Errorf("--model-keys: %w", err)
		}
	}
	if _, err := k.Add(s.Public()); err != nil {
		return nil, err
	}
	return k, nil
}

// newBackupCommand copies the store of a stopped coordinator.
func newBackupCommand() *cobra.Command {
	cmd, data := storeCommand("backup --data DIR --out FILE", "Copy the store of a stopped coordinator", defaultData)
	out := cmd.Flags().String("out", "", "backup file to write (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *out == "" || len(args) > 0 {
			return cli.Usagef("backup: --out FILE is required, and nothing else")
		}
		n, err := store.BackupStore(*data, *out)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%d bytes)\n", *out, n)
		return nil
	}
	return cmd
}

// newCheckCommand checks a store (or a backup) as the coordinator does
// at start.
func newCheckCommand() *cobra.Command {
	cmd, data := storeCommand("check (--data DIR | --file FILE) --key KEY [--model-keys KEYS]", "Check a store or a backup as the coordinator does at start", defaultData)
	file := cmd.Flags().String("file", "", "check this store file (a backup) instead of DATA/coordinator.db")
	loadKeys := keyringFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cli.Usagef("check: unexpected arguments %q", args)
		}
		keys, err := loadKeys()
		if err != nil {
			return err
		}
		path := *file
		if path == "" {
			path = filepath.Join(*data, "coordinator.db")
		}
		if err := store.CheckStoreFile(path, keys); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: consistent\n", path)
		return nil
	}
	return cmd
}

// newRestoreCommand installs a checked backup as the store of a stopped
// coordinator.
func newRestoreCommand() *cobra.Command {
	cmd, data := storeCommand("restore --data DIR --from FILE --key KEY [--model-keys KEYS]", "Install a checked backup as the store of a stopped coordinator", defaultData)
	from := cmd.Flags().String("from", "", "backup file to restore (required)")
	loadKeys := keyringFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *from == "" || len(args) > 0 {
			return cli.Usagef("restore: --from FILE is required, and nothing else")
		}
		keys, err := loadKeys()
		if err != nil {
			return err
		}
		old, err := store.RestoreStore(*data, *from, keys)
		if err != nil {
			return err
		}
		stderr := cmd.ErrOrStderr()
		if old != "" {
			fmt.Fprintf(stderr, "restored %s into %s; the store it replaced is %s\n", *from, *data, old)
		} else {
			fmt.Fprintf(stderr, "restored %s into %s\n", *from, *data)
		}
		return nil
	}
	return cmd
}
