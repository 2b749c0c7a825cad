package natsauth_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/internal/testutil/filefixture"
)

// TestClientSecretFilesBounded: a client's credentials, certificate, key
// and CA files are refused before nats.go or crypto/tls read them whole
// when they are larger than natsauth.MaxSecretFileBytes (before, a 2 GiB
// --creds file was read whole at every connect) or directories; the
// credentials file, read again at every reconnect, must be a regular
// file, while a certificate, read once, may come through a pipe.
func TestClientSecretFilesBounded(t *testing.T) {
	dir := t.TempDir()
	big := filefixture.Sparse(t, dir, "big", natsauth.MaxSecretFileBytes+1)
	fifo := filefixture.FIFO(t, dir, "fifo")
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cc   natsauth.ClientConfig
		want error
	}{
		{"creds too large", natsauth.ClientConfig{CredsFile: big}, boundedio.ErrTooLarge},
		{"creds a FIFO", natsauth.ClientConfig{CredsFile: fifo}, boundedio.ErrNotRegular},
		{"creds a directory", natsauth.ClientConfig{CredsFile: dir}, boundedio.ErrNotRegular},
		{"certificate too large", natsauth.ClientConfig{CertFile: big, KeyFile: small}, boundedio.ErrTooLarge},
		{"key a directory", natsauth.ClientConfig{CertFile: small, KeyFile: dir}, boundedio.ErrNotRegular},
		{"CA too large", natsauth.ClientConfig{CAFile: big}, boundedio.ErrTooLarge},
	}
	// a certificate handed over as a pipe (`<(vault read ...)`) is read:
	// the error is about its content
	go func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Write([]byte("not a certificate"))
			f.Close()
		}
	}()
	piped := natsauth.ClientConfig{CertFile: fifo, KeyFile: small}
	_, err := piped.Options()
	if err == nil || strings.Contains(err.Error(), boundedio.ErrNotRegular.Error()) || !strings.Contains(err.Error(), "PEM") {
		t.Errorf("certificate from a pipe: %v, want it read and refused for its content (no PEM)", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cc.Options()
			// the sentinel is in the message (the errors are wrapped
			// with %v for the config's own sentinels)
			if err == nil || !strings.Contains(err.Error(), tc.want.Error()) {
				t.Fatalf("Options: %v, want an error saying %q", err, tc.want)
			}
			if errors.Is(err, tc.want) {
				return
			}
			if !errors.Is(err, natsauth.ErrSecret) && !errors.Is(err, natsauth.ErrClientConfig) {
				t.Errorf("Options: %v wraps neither ErrSecret nor ErrClientConfig", err)
			}
		})
	}
}
