// Package flowtls is the TLS between the agents' FlowExporter and the Flow
// Aggregator (transports grpc and tls), as upstream Antrea sets it up: the
// Flow Aggregator makes a CA of its own at start, a server certificate for
// its Service's names (and flowAggregatorAddress), and one client
// certificate for every agent; it publishes the CA certificate in the
// ConfigMap flow-aggregator-ca and the client certificate and key in the
// Secret flow-aggregator-client-tls, both in its Namespace, which the agents
// read (a Role of the Flow Aggregator's manifest lets them). Both ends
// verify the other (mutual TLS, TLS 1.2 at least).
package flowtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Where the Flow Aggregator publishes its CA and the agents' client
// certificate (upstream's names), in its Namespace.
const (
	CAConfigMap  = "flow-aggregator-ca"
	CAKey        = "ca.crt"
	ClientSecret = "flow-aggregator-client-tls"
	CertKey      = "tls.crt"
	KeyKey       = "tls.key"
	// ClientName is the client certificate's common name.
	ClientName = "antrea-agent-flow-exporter"
)

// validity of the certificates the Flow Aggregator makes; it makes new
// ones at every start.
const validity = 365 * 24 * time.Hour

// PKI is a CA and what it issued: PEM blocks.
type PKI struct {
	CACert             []byte
	ServerCert, Server []byte // certificate and key
	ClientCert, Client []byte // certificate and key
}

// ServiceNames are the DNS names of a Service (name.namespace,
// name.namespace.svc, name.namespace.svc.cluster.local).
func ServiceNames(namespace, name string) []string {
	base := name + "." + namespace
	return []string{base, base + ".svc", base + ".svc.cluster.local"}
}

// ServerName is the name an agent verifies the Flow Aggregator's
// certificate against when it reaches it as the Service namespace/name.
func ServerName(namespace, name string) string { return name + "." + namespace + ".svc" }

// New makes a CA and a server certificate for names (DNS names or IP
// addresses) and a client certificate, all signed by the CA.
func New(names []string) (*PKI, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "flow-aggregator-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	issue := func(cn string, usage x509.ExtKeyUsage, names []string) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		t := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		for _, n := range names {
			if ip := net.ParseIP(n); ip != nil {
				t.IPAddresses = append(t.IPAddresses, ip)
			} else if n != "" {
				t.DNSNames = append(t.DNSNames, n)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
	}
	p := &PKI{CACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	if p.ServerCert, p.Server, err = issue("flow-aggregator", x509.ExtKeyUsageServerAuth, names); err != nil {
		return nil, err
	}
	if p.ClientCert, p.Client, err = issue(ClientName, x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	return p, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// ServerConfig is the Flow Aggregator's TLS configuration: its server
// certificate, and client certificates required and verified against its CA.
func (p *PKI) ServerConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.ServerCert, p.Server)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CACert) {
		return nil, fmt.Errorf("no CA certificate")
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}, nil
}

// ClientConfig is an agent's TLS configuration: the Flow Aggregator's CA
// (caPEM) trusted for serverName, the client certificate and key presented.
func ClientConfig(caPEM, certPEM, keyPEM []byte, serverName string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no CA certificate in %s", CAConfigMap)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("client certificate of %s: %w", ClientSecret, err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: serverName}, nil
}
