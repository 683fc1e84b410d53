package testpod

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"
)

// selfSignedCert is a certificate for any server name, made at start: the
// test clients skip verification, they only need a TLS server to talk to.
func selfSignedCert(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour * 365), DNSNames: []string{name}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// HTTPConfig says what the http client asks.
type HTTPConfig struct {
	// To is the HOST:PORT connected to, whatever the Host.
	To string
	// Host is the request's Host header (default To's host).
	Host string
	// TLS speaks HTTPS, with SNI as the ClientHello's server name (default
	// Host; none for an IP address, as TLS clients do).
	TLS bool
	SNI string
	// Requests are "METHOD PATH", sent in order on kept-alive connections.
	Requests []string
	// Repeat sends the requests this many times (a load; results are then
	// summarized).
	Repeat  int
	Timeout time.Duration
}

// HTTPResult is one request's outcome: the status and the body's first
// line, or Reset (the connection was reset) or Err.
type HTTPResult struct {
	Request string
	Status  int
	Body    string
	Reset   bool
	Err     error
	Took    time.Duration
}

func (r HTTPResult) String() string {
	switch {
	case r.Reset:
		return r.Request + ": reset"
	case r.Err != nil:
		return r.Request + ": error: " + r.Err.Error()
	}
	return fmt.Sprintf("%s: %d %s", r.Request, r.Status, r.Body)
}

// HTTP sends the requests and returns their results. A request is
// "METHOD /path" or "METHOD /path HOST": HOST, when given, is that
// request's Host header (and TLS server name unless cfg.SNI is set); the
// requests of one host share kept-alive connections.
func HTTP(ctx context.Context, cfg HTTPConfig) ([]HTTPResult, error) {
	host, _, err := net.SplitHostPort(cfg.To)
	if err != nil {
		return nil, fmt.Errorf("http: --to %q: %w", cfg.To, err)
	}
	if cfg.Host == "" {
		cfg.Host = host
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	var d net.Dialer
	clients := map[string]*http.Client{}
	clientFor := func(h string) *http.Client {
		if c, ok := clients[h]; ok {
			return c
		}
		sni := cfg.SNI
		if sni == "" {
			if name, _, err := net.SplitHostPort(h); err == nil {
				h = name
			}
			if net.ParseIP(h) == nil {
				sni = h
			}
		}
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, cfg.To)
			},
			TLSClientConfig:     &tls.Config{ServerName: sni, InsecureSkipVerify: true}, //nolint:gosec // a test client: no verification
			MaxIdleConnsPerHost: 1,
		}
		c := &http.Client{Transport: tr, Timeout: cfg.Timeout}
		clients[h] = c
		return c
	}
	defer func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}()
	scheme := "http"
	if cfg.TLS {
		scheme = "https"
	}
	var out []HTTPResult
	for i := 0; i < max(cfg.Repeat, 1); i++ {
		for _, r := range cfg.Requests {
			fields := strings.Fields(r)
			if len(fields) < 2 || len(fields) > 3 || !strings.HasPrefix(fields[1], "/") {
				return nil, fmt.Errorf("http: request %q: want \"METHOD /path [HOST]\"", r)
			}
			h := cfg.Host
			if len(fields) == 3 {
				h = fields[2]
			}
			req, err := http.NewRequestWithContext(ctx, fields[0], scheme+"://"+h+fields[1], nil)
			if err != nil {
				return nil, fmt.Errorf("http: request %q: %w", r, err)
			}
			res := HTTPResult{Request: r}
			start := time.Now()
			resp, err := clientFor(h).Do(req)
			if err == nil {
				line, rerr := bufio.NewReader(resp.Body).ReadString('\n')
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				res.Status, res.Body = resp.StatusCode, strings.TrimSpace(line)
				if rerr != nil && !errors.Is(rerr, io.EOF) {
					err = rerr
				}
			}
			res.Took = time.Since(start)
			if err != nil {
				res.Reset, res.Err = errors.Is(err, syscall.ECONNRESET), err
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// HTTPSummary is a load's figures: requests, those answered 2xx, rate and
// latency percentiles.
func HTTPSummary(results []HTTPResult, took time.Duration) string {
	var ok int
	lat := make([]time.Duration, 0, len(results))
	for _, r := range results {
		if r.Err == nil && r.Status/100 == 2 {
			ok++
		}
		lat = append(lat, r.Took)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return fmt.Sprintf("requests %d ok %d rps %.0f p50 %s p99 %s", len(results), ok, float64(len(results))/took.Seconds(), pct(0.50), pct(0.99))
}
