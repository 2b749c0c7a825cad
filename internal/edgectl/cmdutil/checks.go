package cmdutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/internal/cli"
)

// CheckParallel validates a --parallel value: 0 means the number of CPUs;
// a negative count is a usage error.
func CheckParallel(n int) error {
	if n < 0 {
		return cli.Usagef("--parallel: %d, want 0 (the number of CPUs) or more", n)
	}
	return nil
}

// ErrOutIsDir: a file to write (--out) names a directory.
var ErrOutIsDir = errors.New("is a directory, want a file path")

// CheckOutFile refuses, before any work, a file to write (the flag's
// value path) that names a directory or whose directory does not exist,
// so a long command does not fail only when it writes its result (and
// leave a temporary file beside the directory).
func CheckOutFile(flag, path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: %w", flag, path, ErrOutIsDir)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: directory %s does not exist", flag, path, dir)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, path, err)
	case !st.IsDir():
		return fmt.Errorf("%s %s: %s is not a directory", flag, path, dir)
	}
	return nil
}

// ErrOutNotDir: a directory to write (--out) names something else.
var ErrOutNotDir = errors.New("exists and is not a directory")

// CheckOutDir refuses, before any work, a directory to write (the flag's
// value path) that exists as something other than a directory (a
// simulation ran to its end and then failed to create it).
func CheckOutDir(flag, path string) error {
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%s %s: %w", flag, path, ErrOutNotDir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}

// MaxKubeconfigBytes caps a kubeconfig file: client-go reads one whole,
// with no limit of its own (and blocks on a FIFO).
const MaxKubeconfigBytes = 16 << 20

// CheckKubeconfig refuses, before client-go reads them, the kubeconfig
// files rules would load that are directories or sockets, or regular files
// larger than MaxKubeconfigBytes (a missing file on $KUBECONFIG or the
// default path is client-go's to report or skip; a pipe or a device,
// `--kubeconfig <(sops -d kc.enc)` or KUBECONFIG=/dev/null for the
// in-cluster config, is client-go's to read, as before).
func CheckKubeconfig(rules *clientcmd.ClientConfigLoadingRules) error {
	for _, p := range rules.GetLoadingPrecedence() {
		if _, err := boundedio.StatOrPipe(p, MaxKubeconfigBytes); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kubeconfig: %w", err)
		}
	}
	return nil
}
