package coordcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/edgesched/edgesched/coordinator/store"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/quant"
)

// storeCommands are edge-coordinator's subcommands on its store
// (docs/federated.md "Backups and a damaged store"): backup, check and
// restore. The running coordinator writes online backups itself
// (--backup-every, and the admin endpoint store.backup).
var storeCommands = map[string]func(context.Context, []string, io.Writer) error{
	"backup":  backupCommand,
	"check":   checkCommand,
	"restore": restoreCommand,
}

func storeFlags(name, usage string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("edge-coordinator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edge-coordinator %s\n", usage)
		fs.PrintDefaults()
	}
	return fs, fs.String("data", "coordinator-data", "data directory (coordinator.db)")
}

// keyring is the coordinator's public key (from its private key file)
// and the further trusted model keys.
func keyring(keyFile, modelKeys string) (*quant.Keyring, error) {
	if keyFile == "" {
		return nil, cli.Usagef("--key is required (the model-signing key: the store's artifacts are checked against it)")
	}
	s, err := quant.ReadSigner(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	k := &quant.Keyring{}
	if modelKeys != "" {
		if k, err = quant.LoadKeyring(modelKeys); err != nil {
			return nil, fmt.Errorf("--model-keys: %w", err)
		}
	}
	if _, err := k.Add(s.Public()); err != nil {
		return nil, err
	}
	return k, nil
}

// backupCommand copies the store of a stopped coordinator.
func backupCommand(_ context.Context, args []string, stderr io.Writer) error {
	fs, data := storeFlags("backup", "backup --data DIR --out FILE", stderr)
	out := fs.String("out", "", "backup file to write (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return cli.Usagef("backup: --out FILE is required, and nothing else")
	}
	n, err := store.BackupStore(*data, *out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s (%d bytes)\n", *out, n)
	return nil
}

// checkCommand checks a store (or a backup) as the coordinator does at
// start.
func checkCommand(_ context.Context, args []string, stderr io.Writer) error {
	fs, data := storeFlags("check", "check (--data DIR | --file FILE) --key KEY [--model-keys DIR]", stderr)
	file := fs.String("file", "", "check this store file (a backup) instead of DATA/coordinator.db")
	keyFile := fs.String("key", "", "the model-signing private key (required)")
	modelKeys := fs.String("model-keys", "", "further model-signing public keys (a key rotation)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("check: unexpected arguments %q", fs.Args())
	}
	keys, err := keyring(*keyFile, *modelKeys)
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
	fmt.Fprintf(stderr, "%s: consistent\n", path)
	return nil
}

// restoreCommand installs a checked backup as the store of a stopped
// coordinator.
func restoreCommand(_ context.Context, args []string, stderr io.Writer) error {
	fs, data := storeFlags("restore", "restore --data DIR --from FILE --key KEY [--model-keys DIR]", stderr)
	from := fs.String("from", "", "backup file to restore (required)")
	keyFile := fs.String("key", "", "the model-signing private key (required)")
	modelKeys := fs.String("model-keys", "", "further model-signing public keys (a key rotation)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from == "" || fs.NArg() > 0 {
		return cli.Usagef("restore: --from FILE is required, and nothing else")
	}
	keys, err := keyring(*keyFile, *modelKeys)
	if err != nil {
		return err
	}
	old, err := store.RestoreStore(*data, *from, keys)
	if err != nil {
		return err
	}
	if old != "" {
		fmt.Fprintf(stderr, "restored %s into %s; the store it replaced is %s\n", *from, *data, old)
	} else {
		fmt.Fprintf(stderr, "restored %s into %s\n", *from, *data)
	}
	return nil
}
