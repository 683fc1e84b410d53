package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	genericoptions "k8s.io/apiserver/pkg/server/options"
)

// selfSignedValidity is how long a generated CA and serving certificate
// are valid (as k8s.io/client-go/util/cert's generator).
const selfSignedValidity = 365 * 24 * time.Hour

// writeSelfSignedECDSA generates, where serving would generate its
// self-signed pair (the cert dir; nothing when a pair is given or already
// there), a CA and a serving certificate signed by it with ECDSA P-256 keys
// instead of the generic server's RSA-2048: every agent dials the
// controller directly, so a controller start or restart is 1,000 TLS
// handshakes at once at 1,000 Nodes, and an ECDSA signature costs the
// server a small fraction of an RSA one (docs/scale.md). The cert file
// holds the serving certificate then the CA, as the generic generator's.
func writeSelfSignedECDSA(s *genericoptions.SecureServingOptionsWithLoopback, host string, dnsNames []string, ips []net.IP) error {
	if s == nil || (s.BindPort == 0 && s.Listener == nil) || s.ServerCert.CertKey.CertFile != "" || s.ServerCert.CertKey.KeyFile != "" {
		return nil
	}
	certFile := filepath.Join(s.ServerCert.CertDirectory, s.ServerCert.PairName+".crt")
	keyFile := filepath.Join(s.ServerCert.CertDirectory, s.ServerCert.PairName+".key")
	if _, err := os.Stat(certFile); err == nil {
		if _, err := os.Stat(keyFile); err == nil {
			return nil
		}
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", host, now.Unix())},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1), Subject: pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(selfSignedValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true,
		DNSNames: dnsNames, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.ServerCert.CertDirectory, 0o755); err != nil {
		return err
	}
	certPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", keyFile, err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", certFile, err)
	}
	return nil
}
