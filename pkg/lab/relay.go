package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/klog/v2"
)

// netnsDialer dials TCP from inside a network namespace: the socket is created
// on a thread that has entered the netns, and a socket stays in the netns it
// was created in, so the rest of the process keeps the root netns.
type netnsDialer struct {
	netns ns.NetNS
}

func newNetNSDialer(name string) (*netnsDialer, error) {
	h, err := ns.GetNS(netnsPath(name))
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	return &netnsDialer{netns: h}, nil
}

// DialContext has the signature of net.Dialer.DialContext.
func (d *netnsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := d.netns.Do(func(ns.NetNS) error {
		var dialer net.Dialer
		c, err := dialer.DialContext(ctx, network, addr)
		conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s in netns %s: %w", addr, d.netns.Path(), err)
	}
	return conn, nil
}

func (d *netnsDialer) Close() error { return d.netns.Close() }

// relay forwards TCP connections accepted on listenAddr (root netns) to
// target, dialed in the control-plane netns.
type relay struct {
	ln     net.Listener
	target string
	dialer *netnsDialer
	wg     sync.WaitGroup
}

func startRelay(listenAddr, target string, dialer *netnsDialer) (*relay, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for the API server relay (is another lab or API server using it?): %w", listenAddr, err)
	}
	r := &relay{ln: ln, target: target, dialer: dialer}
	r.wg.Add(1)
	go r.serve()
	klog.InfoS("Relaying the API server", "listen", listenAddr, "target", target)
	return r, nil
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				klog.ErrorS(err, "API server relay stopped accepting")
			}
			return
		}
		go r.forward(c)
	}
}

func (r *relay) forward(client net.Conn) {
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	upstream, err := r.dialer.DialContext(ctx, "tcp", r.target)
	cancel()
	if err != nil {
		klog.ErrorS(err, "API server relay could not reach the API server", "target", r.target)
		return
	}
	defer upstream.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		// Pass the half-close on so the other direction can finish.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	wg.Add(2)
	go pipe(upstream, client)
	go pipe(client, upstream)
	wg.Wait()
}

// Close stops accepting; connections in flight end with their peers.
func (r *relay) Close() error {
	err := r.ln.Close()
	r.wg.Wait()
	return err
}
