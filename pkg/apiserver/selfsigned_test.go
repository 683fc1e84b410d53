package apiserver

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestTheSelfSignedPairIsECDSAAndVerifiesForTheServiceName(t *testing.T) {
	o := NewOptions()
	o.SecureServing.BindPort = 10349
	o.SecureServing.ServerCert.CertDirectory = t.TempDir()
	if err := writeSelfSignedECDSA(o.SecureServing, ServiceDNSName, []string{ServiceDNSName, "localhost"}, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(o.SecureServing.ServerCert.CertDirectory, o.SecureServing.ServerCert.PairName+".crt")
	keyFile := filepath.Join(o.SecureServing.ServerCert.CertDirectory, o.SecureServing.ServerCert.PairName+".key")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok || len(pair.Certificate) != 2 {
		t.Fatalf("key %T with %d certificates, want ECDSA with the serving certificate and its CA", pair.PrivateKey, len(pair.Certificate))
	}
	ca, err := (&Server{certFile: certFile}).CABundle()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ServiceDNSName, "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
			t.Errorf("the serving certificate does not verify for %s with the published CA: %v", name, err)
		}
	}
	// A pair already there (a restart with the same cert dir) is kept.
	before, _ := os.ReadFile(certFile)
	if err := writeSelfSignedECDSA(o.SecureServing, ServiceDNSName, []string{ServiceDNSName}, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(certFile); string(after) != string(before) {
		t.Error("an existing pair was replaced")
	}
}
