package nodelatency

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"k8s.io/klog/v2"
)

// ListenFunc opens an ICMP socket: network "ip4:icmp" or "ip6:ipv6-icmp"
// (icmp.ListenPacket's; tests pass one that opens it inside a netns).
type ListenFunc func(network, address string) (*icmp.PacketConn, error)

// family is one IP family's socket.
type family struct {
	network string
	proto   int // the ICMP protocol number for icmp.ParseMessage
	echo    icmp.Type
	reply   icmp.Type
	conn    *icmp.PacketConn
}

// Prober sends the rounds of echo requests and matches the replies. One raw
// socket per family serves every target: 1,000 peers cost 1,000 sendto and
// 1,000 recvfrom per interval, no goroutine or timer per peer.
type Prober struct {
	id       uint16 // the echo identifier: this agent's replies among others' (ping's)
	book     *book
	families [2]*family // IPv4, IPv6; nil when that family could not be opened
	wg       sync.WaitGroup
}

// NewProber opens the sockets (a family that cannot be opened is logged and
// skipped; none at all is an error) and starts their receive loops, which
// stop on Close.
func NewProber(listen ListenFunc) (*Prober, error) {
	if listen == nil {
		listen = icmp.ListenPacket
	}
	p := &Prober{id: uint16(os.Getpid()), book: newBook()}
	specs := [2]family{
		{network: "ip4:icmp", proto: 1, echo: ipv4.ICMPTypeEcho, reply: ipv4.ICMPTypeEchoReply},
		{network: "ip6:ipv6-icmp", proto: 58, echo: ipv6.ICMPTypeEchoRequest, reply: ipv6.ICMPTypeEchoReply},
	}
	var errs []error
	for i := range specs {
		f := specs[i]
		addr := "0.0.0.0"
		if i == 1 {
			addr = "::"
		}
		c, err := listen(f.network, addr)
		if err != nil {
			klog.ErrorS(err, "Cannot open an ICMP socket; that family is not probed", "network", f.network)
			errs = append(errs, err)
			continue
		}
		f.conn = c
		p.families[i] = &f
	}
	if p.families[0] == nil && p.families[1] == nil {
		return nil, fmt.Errorf("opening ICMP sockets: %w", errors.Join(errs...))
	}
	for _, f := range p.families {
		if f != nil {
			p.wg.Add(1)
			go p.receive(f)
		}
	}
	return p, nil
}

// Close closes the sockets and waits for the receive loops.
func (p *Prober) Close() {
	for _, f := range p.families {
		if f != nil {
			_ = f.conn.Close()
		}
	}
	p.wg.Wait()
}

// SetTargets replaces the targets, keeping the records of those that stay.
func (p *Prober) SetTargets(ts []Target) { p.book.setTargets(ts) }

// familyOf is the socket for ip, nil if that family is not open.
func (p *Prober) familyOf(ip netip.Addr) *family {
	if ip.Is4() {
		return p.families[0]
	}
	return p.families[1]
}

// Round sends one echo request to every target; a probe of the previous
// round still unanswered is lost. Send errors (no route, link down) leave the
// probe outstanding: it is lost like an unanswered one.
func (p *Prober) Round(ctx context.Context) {
	p.book.mu.Lock()
	ips := make([]netip.Addr, 0, len(p.book.targets))
	for ip := range p.book.targets {
		ips = append(ips, ip)
	}
	p.book.mu.Unlock()
	for _, ip := range ips {
		if ctx.Err() != nil {
			return
		}
		f := p.familyOf(ip)
		if f == nil {
			continue
		}
		seq, ok := p.book.next(ip, time.Now())
		if !ok {
			continue
		}
		b, err := (&icmp.Message{Type: f.echo, Body: &icmp.Echo{ID: int(p.id), Seq: int(seq)}}).Marshal(nil)
		if err != nil {
			continue
		}
		if _, err := f.conn.WriteTo(b, &net.IPAddr{IP: ip.AsSlice()}); err != nil {
			klog.V(4).InfoS("Cannot send an echo request", "target", ip, "err", err)
		}
	}
}

// receive matches the socket's echo replies to outstanding probes until the
// socket is closed.
func (p *Prober) receive(f *family) {
	defer p.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := f.conn.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			klog.V(4).InfoS("ICMP read failed", "network", f.network, "err", err)
			continue
		}
		m, err := icmp.ParseMessage(f.proto, buf[:n])
		if err != nil || m.Type != f.reply {
			continue
		}
		e, ok := m.Body.(*icmp.Echo)
		if !ok || uint16(e.ID) != p.id {
			continue
		}
		a, ok := from.(*net.IPAddr)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		p.book.received(ip.Unmap(), uint16(e.Seq), now)
	}
}
