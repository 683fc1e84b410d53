package flowexporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ipfix"
)

// Message sizes: a UDP message fits an Ethernet MTU with IP and UDP
// headers (RFC 7011 section 10.3.3); a TCP one may take the largest.
const (
	maxUDPMessage = 1400
	maxTCPMessage = ipfix.MaxMessageLen
)

// sender owns the connection to the collector: it sends the batches the
// poll loop queues, reconnects (with backoff) when the collector goes
// away, and sends the templates on every new connection and, over UDP,
// every templateRefresh. The poll loop never waits for it: a batch that
// finds the queue full is dropped and counted.
type sender struct {
	proto           string
	resolve         func(ctx context.Context) (string, error)
	dial            func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConfig       func(ctx context.Context) (*tls.Config, error)
	templateRefresh time.Duration
	domain          uint32
	node            string
	queue           chan []Record

	sent, dropped, reconnects atomic.Uint64
	connected                 atomic.Bool
}

func (s *sender) enqueue(recs []Record) {
	if len(recs) == 0 {
		return
	}
	select {
	case s.queue <- recs:
	default:
		s.dropped.Add(uint64(len(recs)))
	}
}

// Backoff bounds between connection attempts.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

func (s *sender) run(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		err := s.session(ctx)
		s.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		klog.ErrorS(err, "Flow collector connection failed; reconnecting", "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
		s.reconnects.Add(1)
		if errors.Is(err, errSessionUsed) {
			backoff = minBackoff
		}
	}
}

// errSessionUsed marks a session that sent something before it failed:
// the next attempt starts again from the shortest backoff.
var errSessionUsed = errors.New("collector connection lost")

// session dials the collector and sends until ctx ends or a write fails:
// IPFIX over UDP, TCP or TLS (over TCP), or the gRPC API (grpcSession).
func (s *sender) session(ctx context.Context) error {
	if s.proto == "grpc" {
		return s.grpcSession(ctx)
	}
	addr, err := s.resolve(ctx)
	if err != nil {
		return fmt.Errorf("resolve the flow collector: %w", err)
	}
	network := s.proto
	if network == "tls" {
		network = "tcp"
	}
	conn, err := s.dial(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if s.proto == "tls" {
		if s.tlsConfig == nil {
			return fmt.Errorf("transport tls: no TLS configuration")
		}
		tc, err := s.tlsConfig(ctx)
		if err != nil {
			return fmt.Errorf("TLS configuration of the flow collector: %w", err)
		}
		tconn := tls.Client(conn, tc)
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = tconn.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return fmt.Errorf("TLS handshake with the flow collector: %w", err)
		}
		conn = tconn
	}
	dead := make(chan struct{})
	if network == "tcp" {
		// A collector that closes shows as a read returning: writes
		// after that fail at once instead of filling the socket.
		go func() {
			defer close(dead)
			buf := make([]byte, 512)
			for {
				if _, err := conn.Read(buf); err != nil {
					conn.Close()
					return
				}
			}
		}()
	}
	w := &ipfix.Writer{Domain: s.domain, MaxLen: maxUDPMessage}
	if network == "tcp" {
		w.MaxLen = maxTCPMessage
	}
	write := func(b []byte) error {
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := conn.Write(b)
		return err
	}
	v4, v6 := Templates()
	sendTemplates := func() error {
		return w.Templates(uint32(time.Now().Unix()), write, v4, v6)
	}
	if err := sendTemplates(); err != nil {
		return err
	}
	s.connected.Store(true)
	klog.InfoS("Connected to the flow collector", "address", addr, "protocol", s.proto)
	refresh := time.NewTicker(s.templateRefresh)
	defer refresh.Stop()
	var vals4, vals6 [][]ipfix.Value
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-dead:
			return errSessionUsed
		case <-refresh.C:
			if s.proto == "udp" {
				if err := sendTemplates(); err != nil {
					return errors.Join(errSessionUsed, err)
				}
			}
		case recs := <-s.queue:
			vals4, vals6 = vals4[:0], vals6[:0]
			for i := range recs {
				v := recs[i].values(make([]ipfix.Value, 0, len(v4.Fields)), s.node)
				if recs[i].Orig.Src.Is4() {
					vals4 = append(vals4, v)
				} else {
					vals6 = append(vals6, v)
				}
			}
			now := uint32(time.Now().Unix())
			for _, b := range []struct {
				t    ipfix.Template
				vals [][]ipfix.Value
			}{{v4, vals4}, {v6, vals6}} {
				if len(b.vals) == 0 {
					continue
				}
				if err := w.Data(now, b.t, b.vals, write); err != nil {
					s.dropped.Add(uint64(len(b.vals)))
					return errors.Join(errSessionUsed, err)
				}
				s.sent.Add(uint64(len(b.vals)))
			}
		}
	}
}
