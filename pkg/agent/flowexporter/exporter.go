package flowexporter

import (
	"context"
	"crypto/tls"
	"fmt"
	"hash/fnv"
	"net"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Config is the exporter's configuration (antrea-agent.conf's
// flowExporter section, parsed by pkg/config/agent).
type Config struct {
	NodeName string
	// Collector is the collector's host:port; Resolve, when set, is asked
	// for it at every connection instead (a Service's ClusterIP).
	Collector string
	Resolve   func(ctx context.Context) (string, error)
	// Dial opens the connection to the collector (default: a net.Dialer
	// with a 10s timeout); tests dial inside a network namespace with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Protocol is "tcp", "udp", "tls" (IPFIX over TLS) or "grpc" (the
	// gRPC API, over TLS).
	Protocol string
	// TLS gives the TLS configuration of the transports tls and grpc, at
	// every connection (the Flow Aggregator's CA and client certificate,
	// which it may have renewed).
	TLS func(ctx context.Context) (*tls.Config, error)
	// PollInterval is how often conntrack is read; ActiveTimeout and
	// IdleTimeout say when a connection is exported (Store.Due).
	PollInterval, ActiveTimeout, IdleTimeout time.Duration
	// MaxConnections bounds the store (default 65536): beyond, the oldest
	// connection is dropped, unexported, and counted.
	MaxConnections int
	// MaxDenied bounds the denied connections held (default 4096):
	// beyond, the oldest is dropped, unexported, and counted.
	MaxDenied int
	// QueueLen bounds the polls' batches waiting for the collector
	// (default 16); beyond, a batch is dropped and counted.
	QueueLen int
	// TemplateRefresh is how often templates are sent again over UDP
	// (default 60s).
	TemplateRefresh time.Duration
}

// Exporter polls a ConnectionSource, keeps the connections in a Store and
// sends their records to the collector (sender).
type Exporter struct {
	cfg      Config
	source   ConnectionSource
	feed     CounterFeed
	pods     PodLookup
	services ServiceLookup
	rules    RuleLookup
	labels   LabelLookup
	store    *Store
	denied   *DenyStore
	sender   *sender

	mu    sync.Mutex
	stats Stats
}

// Stats are the exporter's counters.
type Stats struct {
	Polls, PollErrors uint64
	// Connections is how many the store holds; Evicted how many it
	// dropped to stay within MaxConnections.
	Connections int
	Evicted     uint64
	// RecordsSent were written to the collector; RecordsDropped were not
	// (queue full, or lost with a failed connection).
	RecordsSent, RecordsDropped, Reconnects uint64
	Connected                               bool
	LastPoll                                time.Duration
	// Denied are the denied connections' counters.
	Denied DenyStats
}

// New returns an exporter. feed may be nil when the source has counts;
// pods and services may be nil (no enrichment).
func New(cfg Config, source ConnectionSource, feed CounterFeed, pods PodLookup, services ServiceLookup) (*Exporter, error) {
	if cfg.PollInterval <= 0 || cfg.ActiveTimeout <= 0 || cfg.IdleTimeout <= 0 {
		return nil, fmt.Errorf("poll interval %v, active timeout %v and idle timeout %v must be positive",
			cfg.PollInterval, cfg.ActiveTimeout, cfg.IdleTimeout)
	}
	switch cfg.Protocol {
	case "tcp", "udp":
	case "tls", "grpc":
		if cfg.TLS == nil {
			return nil, fmt.Errorf("protocol %s: no TLS configuration", cfg.Protocol)
		}
	default:
		return nil, fmt.Errorf("protocol %q: want tcp, udp, tls or grpc", cfg.Protocol)
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 65536
	}
	if cfg.MaxDenied <= 0 {
		cfg.MaxDenied = 4096
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 16
	}
	if cfg.TemplateRefresh <= 0 {
		cfg.TemplateRefresh = 60 * time.Second
	}
	resolve := cfg.Resolve
	if resolve == nil {
		if _, _, err := net.SplitHostPort(cfg.Collector); err != nil {
			return nil, fmt.Errorf("collector %q: %w", cfg.Collector, err)
		}
		resolve = func(context.Context) (string, error) { return cfg.Collector, nil }
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		cfg.Dial = d.DialContext
	}
	h := fnv.New32a()
	h.Write([]byte(cfg.NodeName))
	return &Exporter{cfg: cfg, source: source, feed: feed, pods: pods, services: services,
		store: NewStore(cfg.MaxConnections), denied: NewDenyStore(cfg.MaxDenied),
		sender: &sender{proto: cfg.Protocol, resolve: resolve, dial: cfg.Dial, tlsConfig: cfg.TLS, templateRefresh: cfg.TemplateRefresh,
			domain: h.Sum32(), node: cfg.NodeName, queue: make(chan []Record, cfg.QueueLen)},
	}, nil
}

// Run polls every PollInterval and sends until ctx ends.
func (e *Exporter) Run(ctx context.Context) {
	klog.InfoS("Starting the flow exporter", "collector", e.cfg.Collector, "protocol", e.cfg.Protocol,
		"pollInterval", e.cfg.PollInterval, "activeTimeout", e.cfg.ActiveTimeout, "idleTimeout", e.cfg.IdleTimeout)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.sender.run(ctx) }()
	defer wg.Wait()
	t := time.NewTicker(e.cfg.PollInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := e.Poll(ctx, time.Now()); err != nil && ctx.Err() == nil {
			if !failing {
				klog.ErrorS(err, "Polling connections failed")
			}
			failing = true
		} else {
			failing = false
		}
	}
}

// Poll reads the connections once, updates the store and queues the
// records due at now, the denied connections' with them (those even when
// the connections could not be read).
func (e *Exporter) Poll(ctx context.Context, now time.Time) error {
	start := time.Now()
	conns, err := e.source.Connections(ctx)
	e.mu.Lock()
	e.stats.Polls++
	if err != nil {
		e.stats.PollErrors++
	}
	e.mu.Unlock()
	if err != nil {
		e.sender.enqueue(e.enrichAll(e.denied.Due(now, e.cfg.ActiveTimeout, e.cfg.IdleTimeout)))
		return err
	}
	if e.feed != nil {
		keep := make(map[Tuple]struct{}, 2*len(conns))
		for i := range conns {
			c := &conns[i]
			if !c.HasCounts {
				c.OrigCounts, _ = e.feed.Counts(c.Orig)
				c.ReplyCounts, _ = e.feed.Counts(c.Reply)
			}
			keep[c.Orig], keep[c.Reply] = struct{}{}, struct{}{}
		}
		e.feed.Retain(keep)
	}
	e.store.Update(conns, now)
	recs := e.store.Due(now, e.cfg.ActiveTimeout, e.cfg.IdleTimeout)
	recs = append(recs, e.denied.Due(now, e.cfg.ActiveTimeout, e.cfg.IdleTimeout)...)
	e.sender.enqueue(e.enrichAll(recs))
	e.mu.Lock()
	e.stats.LastPoll = time.Since(start)
	e.stats.Connections, e.stats.Evicted = e.store.Len(), e.store.Evicted
	e.mu.Unlock()
	return nil
}

func (e *Exporter) enrichAll(recs []Record) []Record {
	for i := range recs {
		enrich(&recs[i], e.pods, e.services, e.rules, e.labels)
	}
	return recs
}

// SetRules names the NetworkPolicy rules of records from now on (the
// agent's policy controller starts after the exporter). Call it before Run.
func (e *Exporter) SetRules(r RuleLookup) { e.rules = r }

// SetLabels adds the local Pods' labels to records. Call it before Run.
func (e *Exporter) SetLabels(l LabelLookup) { e.labels = l }

// Deny counts a packet a NetworkPolicy denied in its denied connection,
// exported at the next poll (DenyStore). It never blocks on the poll loop's
// work or the collector: the packet-in handler calls it.
func (e *Exporter) Deny(p DeniedPacket) { e.denied.Add(p) }

// Stats returns the exporter's counters.
func (e *Exporter) Stats() Stats {
	e.mu.Lock()
	s := e.stats
	e.mu.Unlock()
	s.RecordsSent, s.RecordsDropped = e.sender.sent.Load(), e.sender.dropped.Load()
	s.Reconnects, s.Connected = e.sender.reconnects.Load(), e.sender.connected.Load()
	s.Denied = e.denied.Stats()
	return s
}
