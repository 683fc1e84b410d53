package flowexporter

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

type fakeSource struct {
	mu    sync.Mutex
	conns []Connection
}

func (f *fakeSource) set(c ...Connection) {
	f.mu.Lock()
	f.conns = c
	f.mu.Unlock()
}

func (f *fakeSource) Connections(context.Context) ([]Connection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Connection(nil), f.conns...), nil
}

type fakePods map[netip.Addr][2]string

func (p fakePods) PodOf(ip netip.Addr) (string, string, bool) {
	v, ok := p[ip]
	return v[0], v[1], ok
}

// tcpCollector accepts IPFIX over TCP on loopback and passes each decoded
// record to out; stop closes it (and its connections).
func tcpCollector(t *testing.T, addr string, out chan<- ipfix.Record) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := ipfix.NewSession()
				var buf []byte
				for {
					b, err := ipfix.ReadMessage(c, buf)
					if err != nil {
						return
					}
					if !deliver(t, s, b, out) {
						return
					}
					buf = b
				}
			}()
		}
	}()
	stop := func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// deliver decodes a message and passes its records to out (dropping what
// does not fit); false when the message did not decode.
func deliver(t *testing.T, s *ipfix.Session, b []byte, out chan<- ipfix.Record) bool {
	m, err := s.Decode(b)
	if err != nil {
		t.Errorf("collector: %v", err)
		return false
	}
	for _, r := range m.Records {
		select {
		case out <- r:
		default:
		}
	}
	return true
}

func newTestExporter(t *testing.T, src ConnectionSource, proto, addr string) *Exporter {
	t.Helper()
	e, err := New(Config{NodeName: "node-1", Collector: addr, Protocol: proto, PollInterval: 20 * time.Millisecond,
		ActiveTimeout: 50 * time.Millisecond, IdleTimeout: time.Minute},
		src, nil, fakePods{netip.MustParseAddr("10.10.1.2"): {"ns", "client"}, netip.MustParseAddr("10.10.1.3"): {"ns", "server"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runExporter(t, e)
	return e
}

// runExporter runs e until the test ends.
func runExporter(t *testing.T, e *Exporter) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitRecord(t *testing.T, out <-chan ipfix.Record, what string, ok func(ipfix.Record) bool) ipfix.Record {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-out:
			if ok(r) {
				return r
			}
		case <-deadline:
			t.Fatalf("no record: %s", what)
		}
	}
}

func TestExporterSendsEnrichedRecordsOverTCP(t *testing.T) {
	out := make(chan ipfix.Record, 100)
	addr, _ := tcpCollector(t, "127.0.0.1:0", out)
	src := &fakeSource{}
	src.set(conn(40000, Counts{10, 1000}, Counts{8, 4000}))
	newTestExporter(t, src, "tcp", addr)
	r := waitRecord(t, out, "of the connection", func(ipfix.Record) bool { return true })
	want := map[ipfix.Element]ipfix.Value{
		ipfix.SourceIPv4Address:        ipfix.A(netip.MustParseAddr("10.10.1.2")),
		ipfix.DestinationIPv4Address:   ipfix.A(netip.MustParseAddr("10.10.1.3")),
		ipfix.SourceTransportPort:      ipfix.U(40000),
		ipfix.DestinationTransportPort: ipfix.U(80),
		ipfix.ProtocolIdentifier:       ipfix.U(6),
		ipfix.OctetTotalCount:          ipfix.U(1000),
		ipfix.ReverseOctetTotalCount:   ipfix.U(4000),
		ipfix.PacketTotalCount:         ipfix.U(10),
		ipfix.SourcePodName:            ipfix.S("client"),
		ipfix.DestinationPodName:       ipfix.S("server"),
		ipfix.SourcePodNamespace:       ipfix.S("ns"),
		ipfix.SourceNodeName:           ipfix.S("node-1"),
		ipfix.FlowType:                 ipfix.U(uint64(ipfix.FlowTypeIntraNode)),
		ipfix.DestinationClusterIPv4:   ipfix.A(netip.IPv4Unspecified()),
	}
	for e, v := range want {
		got, ok := r.Get(e)
		if !ok || got.Uint != v.Uint || got.Str != v.Str || got.Addr != v.Addr {
			t.Errorf("%s = %+v (present %v), want %+v", e, got, ok, v)
		}
	}
}

func TestPollNeverWaitsForAnUnreachableCollector(t *testing.T) {
	// A port nothing listens on: take one, close it.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	src := &fakeSource{}
	e, err := New(Config{NodeName: "n", Collector: addr, Protocol: "tcp", PollInterval: time.Hour,
		ActiveTimeout: time.Nanosecond, IdleTimeout: time.Hour, QueueLen: 2}, src, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	now := time.Now()
	for i := range 10 {
		src.set(conn(1, Counts{uint64(i + 1), 60}, Counts{}))
		if err := e.Poll(ctx, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.Stats(); s.RecordsDropped == 0 || s.RecordsSent != 0 {
		t.Fatalf("stats %+v, want records dropped once the queue of 2 is full", s)
	}
}

func TestNewRefusesBadConfigs(t *testing.T) {
	good := Config{Collector: "127.0.0.1:4739", Protocol: "udp", PollInterval: time.Second, ActiveTimeout: time.Second, IdleTimeout: time.Second}
	for name, mod := range map[string]func(*Config){
		"a poll interval of 0":    func(c *Config) { c.PollInterval = 0 },
		"an unknown transport":    func(c *Config) { c.Protocol = "sctp" },
		"an address without port": func(c *Config) { c.Collector = "127.0.0.1" },
	} {
		t.Run(name, func(t *testing.T) {
			c := good
			mod(&c)
			if _, err := New(c, &fakeSource{}, nil, nil, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := New(good, &fakeSource{}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// udpCollector receives IPFIX over UDP at addr and passes decoded records
// to out until the returned stop.
func udpCollector(t *testing.T, addr string, out chan<- ipfix.Record) (string, func()) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	return pc.LocalAddr().String(), serveUDP(t, pc, out)
}

// serveUDP decodes what pc receives into out until the returned stop
// (also run at the end of the test).
func serveUDP(t *testing.T, pc net.PacketConn, out chan<- ipfix.Record) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := ipfix.NewSession()
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil || !deliver(t, s, buf[:n], out) {
				return
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { pc.Close(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func TestExporterSendsAgainToACollectorThatCameBack(t *testing.T) {
	for _, tc := range []struct {
		proto     string
		collector func(*testing.T, string, chan<- ipfix.Record) (string, func())
	}{{"tcp", tcpCollector}, {"udp", udpCollector}} {
		t.Run(tc.proto, func(t *testing.T) {
			out := make(chan ipfix.Record, 100)
			addr, stop := tc.collector(t, "127.0.0.1:0", out)
			src := &fakeSource{}
			c := conn(40000, Counts{1, 60}, Counts{1, 60})
			src.set(c)
			e := newTestExporter(t, src, tc.proto, addr)
			waitRecord(t, out, "before the collector goes away", func(ipfix.Record) bool { return true })

			stop()
			// Counts keep moving while it is away, so records keep being
			// due: a write fails (TCP: the peer closed; UDP: ICMP port
			// unreachable) and the sender starts a new session. Bounded:
			// about 100 polls.
			for i := uint64(2); i < 100 && e.Stats().Reconnects == 0; i++ {
				c.OrigCounts = Counts{i, 60 * i}
				src.set(c)
				time.Sleep(20 * time.Millisecond)
			}
			if e.Stats().Reconnects == 0 {
				t.Fatal("no new session while the collector was away")
			}
			// A new collector on the same port knows no template: it
			// decodes records only because the new session sent them again.
			// Batches queued while it was away may come first; then the
			// connection's current counts.
			out2 := make(chan ipfix.Record, 100)
			tc.collector(t, addr, out2)
			for i := uint64(200); i < 1000; i++ {
				c.OrigCounts = Counts{i, 60 * i}
				src.set(c)
				select {
				case r := <-out2:
					if v, _ := r.Get(ipfix.PacketTotalCount); v.Uint >= 200 {
						return
					}
				case <-time.After(30 * time.Millisecond):
				}
			}
			t.Fatal("the collector that came back decoded no record of the current counts")
		})
	}
}
