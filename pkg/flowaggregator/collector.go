package flowaggregator

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ipfix"
)

// Bounds of what peers can make the collector hold.
const (
	maxTCPPeers = 4096
	maxUDPPeers = 4096
	// udpPeerIdle forgets a UDP peer (its templates) after this silence.
	udpPeerIdle = 30 * time.Minute
)

// collector receives IPFIX from the agents and passes their decoded records
// to ingest. Each peer has its own Session (templates are per transport
// session); a message it cannot decode is counted and logged once per peer.
type collector struct {
	ingest  func(transport string, recs []ipfix.Record)
	metrics *Metrics
}

// serveTCP accepts agents on l until ctx ends.
func (c *collector) serveTCP(ctx context.Context, l net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxTCPPeers)
	go func() { <-ctx.Done(); l.Close() }()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				klog.ErrorS(err, "Accepting IPFIX connections failed")
			}
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			klog.InfoS("Too many IPFIX peers; closing a new connection", "peer", conn.RemoteAddr(), "max", maxTCPPeers)
			conn.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.tcpPeer(ctx, conn)
		}()
	}
}

func (c *collector) tcpPeer(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c.metrics.ConnectedPeers.Inc()
	defer c.metrics.ConnectedPeers.Dec()
	peer := conn.RemoteAddr().String()
	klog.V(2).InfoS("IPFIX peer connected", "peer", peer, "transport", "tcp")
	s := ipfix.NewSession()
	var buf []byte
	logged := false
	for {
		b, err := ipfix.ReadMessage(conn, buf)
		if err != nil {
			if ctx.Err() == nil && !isEOF(err) {
				// The stream's framing is lost: nothing after can be read.
				c.metrics.DecodeErrors.WithLabelValues("tcp").Inc()
				klog.ErrorS(err, "IPFIX stream from a peer is not readable; closing it", "peer", peer)
			}
			return
		}
		buf = b
		c.handle(s, b, "tcp", peer, &logged)
	}
}

// serveUDP reads datagrams from pc until ctx ends; a peer is its source
// address.
func (c *collector) serveUDP(ctx context.Context, pc net.PacketConn) {
	go func() { <-ctx.Done(); pc.Close() }()
	type udpPeer struct {
		s      *ipfix.Session
		last   time.Time
		logged bool
	}
	peers := map[string]*udpPeer{}
	buf := make([]byte, ipfix.MaxMessageLen)
	lastSweep := time.Now()
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				klog.ErrorS(err, "Reading IPFIX datagrams failed")
			}
			return
		}
		now := time.Now()
		if now.Sub(lastSweep) > time.Minute {
			for k, p := range peers {
				if now.Sub(p.last) > udpPeerIdle {
					delete(peers, k)
				}
			}
			lastSweep = now
		}
		key := from.String()
		p, ok := peers[key]
		if !ok {
			if len(peers) >= maxUDPPeers {
				c.metrics.DecodeErrors.WithLabelValues("udp").Inc()
				continue
			}
			p = &udpPeer{s: ipfix.NewSession()}
			peers[key] = p
		}
		p.last = now
		c.handle(p.s, buf[:n], "udp", key, &p.logged)
	}
}

// isEOF says the peer went away (or the collector stops): not an error of
// the stream.
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}

// handle decodes one message of a peer and ingests its records; an error is
// counted, and logged the first time for the peer (*logged).
func (c *collector) handle(s *ipfix.Session, b []byte, transport, peer string, logged *bool) {
	m, err := s.Decode(b)
	if err != nil {
		c.metrics.DecodeErrors.WithLabelValues(transport).Inc()
		if !*logged {
			klog.ErrorS(err, "An IPFIX message from a peer could not be decoded (logged once per peer; counted in decode_errors_total)",
				"peer", peer, "transport", transport)
			*logged = true
		}
	}
	if m != nil && len(m.Records) > 0 {
		c.metrics.RecordsReceived.WithLabelValues(transport).Add(float64(len(m.Records)))
		c.ingest(transport, m.Records)
	}
}
