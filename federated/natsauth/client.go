package natsauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/internal/boundedio"
)

// ErrClientConfig wraps refusals of a ClientConfig.
var ErrClientConfig = errors.New("natsauth: bad client config")

// ClientConfig is how a component (agent, coordinator, edgectl) connects
// to the fleet's NATS server. The zero value connects anonymously, in
// plaintext, with the default inbox prefix — what an unsecured test
// server accepts and the fleet's server refuses.
type ClientConfig struct {
	// NKeySeedFile is the identity's NKey seed file (mode 0600, from
	// 'edgectl auth'); "" for none.
	NKeySeedFile string
	// CredsFile is a NATS credentials file (user JWT and seed, for
	// operator/JWT deployments) instead of an NKey seed.
	CredsFile string
	// CAFile is the PEM bundle that verifies the server's certificate;
	// setting it turns TLS on. Empty with a tls:// URL: the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS
	// (both or neither).
	CertFile, KeyFile string
	// InboxPrefix is the prefix of reply subjects; it must be the one the
	// identity may subscribe to (SiteInboxPrefix, CoordinatorInboxPrefix,
	// AdminInboxPrefix). Empty: the NATS default "_INBOX".
	InboxPrefix string
}

// Validate names the first bad field.
func (c *ClientConfig) Validate() error {
	switch {
	case c.NKeySeedFile != "" && c.CredsFile != "":
		return fmt.Errorf("%w: an NKey seed and a credentials file are mutually exclusive", ErrClientConfig)
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("%w: a client certificate needs both the certificate and its key", ErrClientConfig)
	case c.InboxPrefix != "" && (strings.ContainsAny(c.InboxPrefix, "*> \t") || strings.HasSuffix(c.InboxPrefix, ".") || strings.HasPrefix(c.InboxPrefix, ".")):
		return fmt.Errorf("%w: inbox prefix %q: want dot-separated tokens without wildcards", ErrClientConfig, c.InboxPrefix)
	}
	return nil
}

// Secure reports whether the connection uses TLS.
func (c *ClientConfig) Secure() bool { return c.CAFile != "" || c.CertFile != "" }

// Options returns the nats.Connect options: the NKey (read now: its seed
// file must be private), or the credentials file; TLS with the CA and the
// client certificate (loaded now, so a bad file is reported at start);
// the inbox prefix.
func (c *ClientConfig) Options() ([]nats.Option, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case c.NKeySeedFile != "":
		kp, err := ReadSeedFile(c.NKeySeedFile)
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSecret, err)
		}
		// the key pair stays in memory for reconnects (it is the
		// identity: a process that connects holds it either way)
		opts = append(opts, nats.Nkey(pub, kp.Sign))
	case c.CredsFile != "":
		// nats.go reads the file whole, at every connect and reconnect
		if _, err := boundedio.Stat(c.CredsFile, MaxSecretFileBytes); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSecret, err)
		}
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.Secure() {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := boundedio.ReadFileOrPipe(context.Background(), c.CAFile, MaxSecretFileBytes)
			if err != nil {
				return nil, fmt.Errorf("%w: CA: %v", ErrClientConfig, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrClientConfig, c.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.CertFile != "" {
			cert, err := loadKeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%w: client certificate: %v", ErrClientConfig, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(tc))
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	return opts, nil
}

// MaxSecretFileBytes caps every credentials, certificate and key file a
// client reads (nats.go and crypto/tls read theirs whole, with no limit
// of their own). The credentials file must be a regular file (nats.go
// reads it again at every reconnect); the CA, certificate and key, read
// once, may be pipes.
const MaxSecretFileBytes = 1 << 20

// loadKeyPair is tls.LoadX509KeyPair on files read within
// MaxSecretFileBytes (read once, they may be pipes: `<(vault read ...)`).
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := boundedio.ReadFileOrPipe(context.Background(), certFile, MaxSecretFileBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := boundedio.ReadFileOrPipe(context.Background(), keyFile, MaxSecretFileBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}
