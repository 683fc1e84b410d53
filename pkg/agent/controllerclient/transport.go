package controllerclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// notKnownWait bounds how long a request waits for the Source's first
// Target before it fails.
const notKnownWait = 30 * time.Second

// DialFunc dials a TCP connection (net.Dialer.DialContext's shape).
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Transport sends requests to the Source's current Target. Each Transport
// has its own connections.
type Transport struct {
	src        *Source
	dial       DialFunc
	clientCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)

	mu     sync.Mutex
	target *Target
	rt     *http.Transport
	conns  *connrotation.ConnectionTracker
}

// NewTransport makes a Transport of src dialing with dial (nil: a
// net.Dialer with a 30 s timeout).
func (s *Source) NewTransport(dial DialFunc) *Transport {
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	t := &Transport{src: s, dial: dial}
	s.onChange(t.reset)
	return t
}

// RoundTrip sends req to the controller's current address.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	target := t.src.Target()
	if target == nil {
		// At start the Source is still reading: wait for it (bounded) rather
		// than fail, so the watchers do not back off meanwhile.
		timer := time.NewTimer(notKnownWait)
		select {
		case <-t.src.Ready():
		case <-req.Context().Done():
		case <-timer.C:
		}
		timer.Stop()
		target = t.src.Target()
	}
	if target == nil {
		return nil, fmt.Errorf("antrea-controller's address and CA are not known yet (Service %s/%s, ConfigMap %s/%s)",
			t.src.namespace, t.src.service, t.src.namespace, t.src.configMap)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = "https", target.Address, ""
	return t.forTarget(target).RoundTrip(r)
}

// forTarget is the http.Transport of target, made on first use.
func (t *Transport) forTarget(target *Target) *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.target == target && t.rt != nil {
		return t.rt
	}
	t.closeLocked()
	t.conns = connrotation.NewConnectionTracker()
	dialer := connrotation.NewDialerWithTracker(connrotation.DialFunc(t.dial), t.conns)
	t.rt = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:       func(*http.Request) (*url.URL, error) { return nil, nil },
		DialContext: dialer.DialContext,
		TLSClientConfig: &tls.Config{
			MinVersion:           tls.VersionTLS12,
			RootCAs:              target.pool,
			ServerName:           controlplane.ControllerServerName,
			GetClientCertificate: t.clientCert,
		},
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	})
	t.target = target
	return t.rt
}

// reset closes every connection, open watches included: the next request
// goes to the new Target with a new transport.
func (t *Transport) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLocked()
}

func (t *Transport) closeLocked() {
	if t.rt != nil {
		t.rt.CloseIdleConnections()
		t.conns.CloseAll()
	}
	t.rt, t.target, t.conns = nil, nil, nil
}

// Config returns a client config that reaches the controller through a new
// Transport of s, with the credentials of auth: its bearer token or token
// file (read again as client-go does: bound ServiceAccount tokens rotate)
// or its client certificate. auth's user agent, QPS and burst are kept;
// its host and TLS settings are not used.
func (s *Source) Config(auth *rest.Config, dial DialFunc) (*rest.Config, error) {
	t := s.NewTransport(dial)
	if auth.CertFile != "" || len(auth.CertData) > 0 {
		certFile, keyFile, certData, keyData := auth.CertFile, auth.KeyFile, auth.CertData, auth.KeyData
		t.clientCert = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			var c tls.Certificate
			var err error
			if certFile != "" {
				c, err = tls.LoadX509KeyPair(certFile, keyFile)
			} else {
				c, err = tls.X509KeyPair(certData, keyData)
			}
			return &c, err
		}
	}
	return &rest.Config{
		Host:            "https://" + controlplane.ControllerServerName,
		Transport:       t,
		BearerToken:     auth.BearerToken,
		BearerTokenFile: auth.BearerTokenFile,
		UserAgent:       auth.UserAgent,
		QPS:             auth.QPS,
		Burst:           auth.Burst,
		Timeout:         auth.Timeout,
	}, nil
}

// Clientset is a clientset of Config(auth, nil). Use it for the
// controlplane.antrea.io and stats.antrea.io groups only: the other groups
// of the clientset (crd.antrea.io) are kube-apiserver's.
func (s *Source) Clientset(auth *rest.Config) (versioned.Interface, error) {
	cfg, err := s.Config(auth, nil)
	if err != nil {
		return nil, err
	}
	return versioned.NewForConfig(cfg)
}
