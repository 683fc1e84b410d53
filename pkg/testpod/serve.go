// Package testpod is the lab's test pod program, in the spirit of agnhost: a
// server that answers every TCP connection and every UDP datagram on its
// ports with its name, and a client that probes one address and reports a
// one-word verdict. The lab runs the server as the process of image-only
// containers; e2e and conformance tests run the client inside pod netns.
package testpod

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// ServeConfig says what the server answers and where.
type ServeConfig struct {
	// Name is what the server answers with, so a client can see who answered.
	Name string
	// TCPPorts and UDPPorts are the ports served on every address.
	TCPPorts []int
	UDPPorts []int
	// HTTPPorts are TCP ports served over HTTP the way agnhost netexec
	// answers: GET /clientip with the client's address as the server sees it
	// (IP:port), /hostname with Name. Hosts outside the cluster use it to
	// report which source address a pod's connection arrived from.
	HTTPPorts []int
	// HTTPSPorts are served like HTTPPorts over TLS, with a self-signed
	// certificate made at start.
	HTTPSPorts []int
	// Host is the address to bind; empty means every address.
	Host string
	// Ready, if set, is closed once every port is bound.
	Ready chan<- struct{}
}

// Serve binds every configured port and answers until ctx is cancelled. It
// fails at once if a port cannot be bound.
func Serve(ctx context.Context, cfg ServeConfig) error {
	if cfg.Name == "" {
		return errors.New("testpod: serve needs a name")
	}
	if len(cfg.TCPPorts)+len(cfg.UDPPorts)+len(cfg.HTTPPorts)+len(cfg.HTTPSPorts) == 0 {
		return fmt.Errorf("testpod: serve %s: no ports", cfg.Name)
	}
	reply := []byte(cfg.Name + "\n")
	var listeners []net.Listener
	var conns []net.PacketConn
	closeAll := func() {
		for _, l := range listeners {
			_ = l.Close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
	var lc net.ListenConfig
	for _, p := range cfg.TCPPorts {
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(p)))
		if err != nil {
			closeAll()
			return fmt.Errorf("testpod: serve %s: listen tcp port %d: %w", cfg.Name, p, err)
		}
		listeners = append(listeners, l)
	}
	for _, p := range cfg.UDPPorts {
		c, err := lc.ListenPacket(ctx, "udp", net.JoinHostPort(cfg.Host, strconv.Itoa(p)))
		if err != nil {
			closeAll()
			return fmt.Errorf("testpod: serve %s: listen udp port %d: %w", cfg.Name, p, err)
		}
		conns = append(conns, c)
	}
	var servers []*http.Server
	for _, p := range cfg.HTTPPorts {
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(p)))
		if err != nil {
			closeAll()
			return fmt.Errorf("testpod: serve %s: listen http port %d: %w", cfg.Name, p, err)
		}
		listeners = append(listeners, l)
		servers = append(servers, &http.Server{Handler: httpHandler(cfg.Name), ReadHeaderTimeout: 5 * time.Second})
	}
	if len(cfg.HTTPSPorts) > 0 {
		cert, err := selfSignedCert(cfg.Name)
		if err != nil {
			closeAll()
			return fmt.Errorf("testpod: serve %s: certificate: %w", cfg.Name, err)
		}
		for _, p := range cfg.HTTPSPorts {
			l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(p)))
			if err != nil {
				closeAll()
				return fmt.Errorf("testpod: serve %s: listen https port %d: %w", cfg.Name, p, err)
			}
			listeners = append(listeners, tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}}))
			servers = append(servers, &http.Server{Handler: httpHandler(cfg.Name), ReadHeaderTimeout: 5 * time.Second})
		}
	}
	klog.InfoS("Serving", "name", cfg.Name, "tcp", cfg.TCPPorts, "udp", cfg.UDPPorts, "http", cfg.HTTPPorts, "https", cfg.HTTPSPorts)
	if cfg.Ready != nil {
		close(cfg.Ready)
	}

	var wg sync.WaitGroup
	plain := len(cfg.TCPPorts)
	for i, l := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i < plain {
				serveTCP(l, reply)
				return
			}
			// Serve returns once closeAll closes the listener.
			_ = servers[i-plain].Serve(l)
		}()
	}
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveUDP(c, reply)
		}()
	}
	<-ctx.Done()
	// Closing the sockets ends the accept and read loops.
	closeAll()
	wg.Wait()
	return nil
}

func serveTCP(l net.Listener, reply []byte) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient accept errors (e.g. EMFILE) must not end the server.
			klog.ErrorS(err, "Accept failed", "address", l.Addr())
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			defer c.Close()
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(reply)
		}()
	}
}

// httpHandler answers /clientip and /hostname as agnhost netexec does, and
// every other request with "<name> <method> <path>" (the layer 7 policy
// tests see which requests reached the server).
func httpHandler(name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s\n", name, r.Method, r.URL.Path)
	})
	mux.HandleFunc("GET /clientip", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.RemoteAddr)
	})
	mux.HandleFunc("GET /hostname", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, name)
	})
	return mux
}

func serveUDP(c net.PacketConn, reply []byte) {
	buf := make([]byte, 64*1024)
	for {
		_, from, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			klog.ErrorS(err, "UDP read failed", "address", c.LocalAddr())
			continue
		}
		if _, err := c.WriteTo(reply, from); err != nil {
			klog.ErrorS(err, "UDP reply failed", "address", c.LocalAddr(), "to", from)
		}
	}
}
