package natsauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/atomicfile"
)

// ErrPKI wraps refusals of DevPKIOptions.
var ErrPKI = errors.New("natsauth: bad PKI options")

// DevPKIOptions say what DevPKI makes.
type DevPKIOptions struct {
	// Hosts are the server certificate's DNS names and IP addresses (what
	// clients dial); at least one.
	Hosts []string
	// Clients name client certificates for mutual TLS (DNS labels; one
	// certificate each, CN = the name).
	Clients []string
	// Valid is the certificates' lifetime (0: one year).
	Valid time.Duration
	// Now is the start of validity (zero: now).
	Now time.Time
}

// PKIFiles are the paths DevPKI wrote.
type PKIFiles struct {
	CA, ServerCert, ServerKey string
	// ClientCerts and ClientKeys by client name.
	ClientCerts, ClientKeys map[string]string
}

// DevPKI makes a small self-contained PKI in dir: a CA (ca.pem; its key
// is not kept), a server certificate and key (server.pem,
// server-key.pem) and one certificate and key per client (NAME.pem,
// NAME-key.pem). ECDSA P-256, keys mode 0600. It is for tests, demos and
// first deployments: production fleets should take certificates from
// their own CA (cert-manager, step-ca, ...), which the generated server
// configuration takes as file paths just the same.
func DevPKI(dir string, o DevPKIOptions) (*PKIFiles, error) {
	if len(o.Hosts) == 0 {
		return nil, fmt.Errorf("%w: at least one server host name or IP", ErrPKI)
	}
	for _, c := range o.Clients {
		if !federated.ValidSite(c) || c == "ca" || c == "server" {
			return nil, fmt.Errorf("%w: client name %q (a DNS label other than ca and server)", ErrPKI, c)
		}
	}
	if o.Valid == 0 {
		o.Valid = 365 * 24 * time.Hour
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki directory: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial := int64(1)
	tmpl := func(cn string) *x509.Certificate {
		serial++
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: []string{"edgesched"}},
			NotBefore: o.Now.Add(-time.Minute), NotAfter: o.Now.Add(o.Valid),
		}
	}
	ca := tmpl("edgesched dev CA")
	ca.IsCA, ca.BasicConstraintsValid = true, true
	ca.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	out := &PKIFiles{CA: filepath.Join(dir, "ca.pem"), ClientCerts: map[string]string{}, ClientKeys: map[string]string{}}
	if err := writePEM(out.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return nil, err
	}
	issue := func(name string, t *x509.Certificate) (string, string, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		t.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, t, caCert, &key.PublicKey, caKey)
		if err != nil {
			return "", "", fmt.Errorf("issue %s: %w", name, err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", err
		}
		cert, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := writePEM(keyPath, "PRIVATE KEY", kder, 0o600); err != nil {
			return "", "", err
		}
		return cert, keyPath, writePEM(cert, "CERTIFICATE", der, 0o644)
	}
	srv := tmpl(o.Hosts[0])
	srv.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			srv.IPAddresses = append(srv.IPAddresses, ip)
		} else {
			srv.DNSNames = append(srv.DNSNames, h)
		}
	}
	if out.ServerCert, out.ServerKey, err = issue("server", srv); err != nil {
		return nil, err
	}
	for _, c := range o.Clients {
		t := tmpl(c)
		t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		if out.ClientCerts[c], out.ClientKeys[c], err = issue(c, t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	b := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := atomicfile.Write(path, b, mode); err != nil {
		return err
	}
	return nil
}
