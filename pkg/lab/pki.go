package lab

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key, both PEM-encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// certSpec says what a certificate is for.
type certSpec struct {
	commonName   string
	organization []string
	dnsNames     []string
	ips          []net.IP
	server       bool
	client       bool
}

// pki is every credential of the lab's control plane.
type pki struct {
	CA          *keyPair
	FrontProxy  *keyPair // requestheader CA for aggregated API servers
	APIServer   *keyPair
	ProxyClient *keyPair
	// ServiceAccountKey signs service account tokens (RSA: every consumer accepts it).
	ServiceAccountKeyPEM []byte
	ServiceAccountPubPEM []byte
}

const certValidity = 365 * 24 * time.Hour

func newCA(cn string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key of CA %s: %w", cn, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA %s: %w", cn, err)
	}
	return newKeyPair(der, key)
}

// issue signs a leaf certificate for spec with the CA.
func (ca *keyPair) issue(spec certSpec) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key of %s: %w", spec.commonName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     spec.dnsNames,
		IPAddresses:  spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate of %s: %w", spec.commonName, err)
	}
	return newKeyPair(der, key)
}

// clientCert issues a client certificate for a user in groups.
func (ca *keyPair) clientCert(user string, groups ...string) (*keyPair, error) {
	return ca.issue(certSpec{commonName: user, organization: groups, client: true})
}

func newKeyPair(der []byte, key *ecdsa.PrivateKey) (*keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s, nil
}

// newPKI makes the CA, the API server's serving certificate (valid for every
// name a client inside or outside the lab uses), the front-proxy CA and client
// for aggregated APIs, and the service account signing key.
func newPKI(cpIP, cpIPv6 net.IP) (*pki, error) {
	ca, err := newCA("antrea-lab-ca")
	if err != nil {
		return nil, err
	}
	fp, err := newCA("antrea-lab-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	_, svcNet, _ := net.ParseCIDR(ServiceCIDR)
	kubernetesSvcIP := make(net.IP, len(svcNet.IP.To4()))
	copy(kubernetesSvcIP, svcNet.IP.To4())
	kubernetesSvcIP[3]++ // the first address of the Service range is the kubernetes Service
	apiserver, err := ca.issue(certSpec{
		commonName: "kube-apiserver",
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		// The IPv6 addresses serve an IPv6-only lab: its nodes dial
		// cpIPv6, its pods the kubernetes Service's IPv6 ClusterIP.
		ips:    []net.IP{net.ParseIP("127.0.0.1"), cpIP, kubernetesSvcIP, cpIPv6, kubernetesSvcIPv6()},
		server: true,
	})
	if err != nil {
		return nil, err
	}
	proxyClient, err := fp.clientCert("front-proxy-client")
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode service account public key: %w", err)
	}
	return &pki{
		CA:          ca,
		FrontProxy:  fp,
		APIServer:   apiserver,
		ProxyClient: proxyClient,
		ServiceAccountKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY",
			Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		ServiceAccountPubPEM: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}),
	}, nil
}

// pkiFiles are the file names the control plane's flags refer to.
type pkiFiles struct {
	CACert, CAKey                   string
	FrontProxyCACert                string
	APIServerCert, APIServerKey     string
	ProxyClientCert, ProxyClientKey string
	SAKey, SAPub                    string
}

// write stores the PKI under dir (keys mode 0600) and returns the file names.
func (p *pki) write(dir string) (pkiFiles, error) {
	f := pkiFiles{
		CACert:           filepath.Join(dir, "ca.crt"),
		CAKey:            filepath.Join(dir, "ca.key"),
		FrontProxyCACert: filepath.Join(dir, "front-proxy-ca.crt"),
		APIServerCert:    filepath.Join(dir, "apiserver.crt"),
		APIServerKey:     filepath.Join(dir, "apiserver.key"),
		ProxyClientCert:  filepath.Join(dir, "front-proxy-client.crt"),
		ProxyClientKey:   filepath.Join(dir, "front-proxy-client.key"),
		SAKey:            filepath.Join(dir, "sa.key"),
		SAPub:            filepath.Join(dir, "sa.pub"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("create pki dir %s: %w", dir, err)
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CACert, p.CA.CertPEM, 0o644},
		{f.CAKey, p.CA.KeyPEM, 0o600},
		{f.FrontProxyCACert, p.FrontProxy.CertPEM, 0o644},
		{f.APIServerCert, p.APIServer.CertPEM, 0o644},
		{f.APIServerKey, p.APIServer.KeyPEM, 0o600},
		{f.ProxyClientCert, p.ProxyClient.CertPEM, 0o644},
		{f.ProxyClientKey, p.ProxyClient.KeyPEM, 0o600},
		{f.SAKey, p.ServiceAccountKeyPEM, 0o600},
		{f.SAPub, p.ServiceAccountPubPEM, 0o644},
	}
	for _, file := range files {
		if err := os.WriteFile(file.path, file.data, file.mode); err != nil {
			return f, fmt.Errorf("write %s: %w", file.path, err)
		}
	}
	return f, nil
}

// kubernetesSvcIPv6 is the kubernetes Service's ClusterIP in an IPv6-only
// lab: the first address of ServiceCIDRv6.
func kubernetesSvcIPv6() net.IP {
	p := netip.MustParsePrefix(ServiceCIDRv6)
	return net.IP(p.Addr().Next().AsSlice())
}
