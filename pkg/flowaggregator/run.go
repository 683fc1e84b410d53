package flowaggregator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/config"
)

// IPFIXPort is where the agents send (RFC 7011's port).
const IPFIXPort = 4739

// Options are flow-aggregator's flags.
type Options struct {
	ConfigFile string
	Kubeconfig string
	// IPFIXAddress is the address the IPFIX collector listens on (TCP and
	// UDP); tests use 127.0.0.1:0.
	IPFIXAddress string
	// Kube reads the Nodes' Pod CIDRs so that records to or from outside
	// the cluster need not wait for a partner.
	Kube bool
}

// AddFlags registers the options.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", "", "flow-aggregator.conf (empty: the defaults)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the API server (empty: in-cluster)")
	fs.StringVar(&o.IPFIXAddress, "ipfix-address", ":"+strconv.Itoa(IPFIXPort), "address the IPFIX collector listens on, TCP and UDP")
	fs.BoolVar(&o.Kube, "kube", true, "read the Nodes' Pod CIDRs from the API server (records of external peers are then not held for a partner)")
}

// Running is a started aggregator: its addresses and parts, for tests.
type Running struct {
	TCPAddr, UDPAddr net.Addr
	APIAddr          net.Addr
	Store            *Store
	Metrics          *Metrics
	Aggregator       *Aggregator
	done             chan struct{}
}

// Wait returns when the aggregator has stopped.
func (r *Running) Wait() { <-r.done }

// Run serves until ctx ends.
func Run(ctx context.Context, o *Options) error {
	cfg := DefaultConfig()
	if o.ConfigFile != "" {
		var err error
		if cfg, err = LoadConfig(o.ConfigFile); err != nil {
			return err
		}
	}
	var isPodIP func(netip.Addr) bool
	if o.Kube {
		rc, err := config.KubeRESTConfig(o.Kubeconfig, "", "flow-aggregator")
		if err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		cidrs, err := watchPodCIDRs(ctx, kube)
		if err != nil {
			return err
		}
		isPodIP = cidrs.contains
	}
	r, err := Start(ctx, cfg, o.IPFIXAddress, ":"+strconv.Itoa(cfg.APIServer.APIPort), isPodIP)
	if err != nil {
		return err
	}
	r.Wait()
	return nil
}

// Start starts the collector, the aggregator, the exporters and the API
// (apiAddr) and returns; they stop when ctx ends.
func Start(ctx context.Context, cfg Config, ipfixAddr, apiAddr string, isPodIP func(netip.Addr) bool) (*Running, error) {
	m := NewMetrics()
	store := NewStore(cfg.RecordBufferSize)
	var exporters []Exporter
	var runs []func(context.Context)
	if fc := cfg.FlowCollector; fc.Enable {
		addr, proto, _ := ParseCollectorAddress(fc.Address)
		domain := uint32(0)
		if fc.ObservationDomainID != nil {
			domain = *fc.ObservationDomainID
		} else {
			h := fnv.New32a()
			h.Write([]byte("flow-aggregator"))
			domain = h.Sum32()
		}
		e := &IPFIXExporter{Address: addr, Protocol: proto, Domain: domain, MaxMsgSize: fc.MaxIPFIXMsgSize,
			TemplateRefresh: cfg.templateRefresh(), Metrics: m, queue: make(chan []Flow, exporterQueue)}
		exporters = append(exporters, e)
		runs = append(runs, e.Run)
	}
	if fl := cfg.FlowLogger; fl.Enable {
		l := &JSONLog{Path: fl.Path, MaxBytes: int64(fl.MaxSize) << 20, MaxBackups: fl.MaxBackups, Metrics: m,
			queue: make(chan []Flow, exporterQueue)}
		exporters = append(exporters, l)
		runs = append(runs, l.Run)
	}
	agg := NewAggregator(cfg.correlationWait(), cfg.activeTimeout(), cfg.inactiveTimeout(), isPodIP, store, m, exporters...)
	r := &Running{Store: store, Metrics: m, Aggregator: agg, done: make(chan struct{})}
	col := &collector{ingest: agg.Ingest, metrics: m}

	var closers []func()
	fail := func(err error) (*Running, error) {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	var tcpL net.Listener
	var udpC net.PacketConn
	if cfg.AggregatorTransportProtocol != "none" {
		// Both transports listen whatever the key says: an agent's
		// flowCollectorAddr chooses, and the Service exposes both.
		var err error
		if tcpL, err = net.Listen("tcp", ipfixAddr); err != nil {
			return fail(fmt.Errorf("IPFIX collector: %w", err))
		}
		closers = append(closers, func() { tcpL.Close() })
		udpAddr := ipfixAddr
		if host, port, err := net.SplitHostPort(ipfixAddr); err == nil && port == "0" {
			// The same port number on UDP as the kernel chose for TCP.
			udpAddr = net.JoinHostPort(host, strconv.Itoa(tcpL.Addr().(*net.TCPAddr).Port))
		}
		if udpC, err = net.ListenPacket("udp", udpAddr); err != nil {
			return fail(fmt.Errorf("IPFIX collector: %w", err))
		}
		closers = append(closers, func() { udpC.Close() })
		r.TCPAddr, r.UDPAddr = tcpL.Addr(), udpC.LocalAddr()
	}
	apiL, err := net.Listen("tcp", apiAddr)
	if err != nil {
		return fail(fmt.Errorf("API: %w", err))
	}
	r.APIAddr = apiL.Addr()
	srv := &http.Server{Handler: Handler(store, m), ReadHeaderTimeout: 10 * time.Second}

	var wg sync.WaitGroup
	start := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	for _, f := range runs {
		start(f)
	}
	start(agg.runExpiry)
	if tcpL != nil {
		start(func(ctx context.Context) { col.serveTCP(ctx, tcpL) })
		start(func(ctx context.Context) { col.serveUDP(ctx, udpC) })
	}
	start(func(ctx context.Context) {
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(apiL); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "API server failed")
		}
	})
	go func() { wg.Wait(); close(r.done) }()
	klog.InfoS("Flow Aggregator started", "ipfixTCP", r.TCPAddr, "ipfixUDP", r.UDPAddr, "api", r.APIAddr,
		"correlationWait", cfg.CorrelationWait, "ipfixExport", cfg.FlowCollector.Enable, "log", cfg.FlowLogger.Enable)
	return r, nil
}

// podCIDRs are the Nodes' Pod CIDRs, from a Node informer.
type podCIDRs struct {
	synced   func() bool
	mu       sync.RWMutex
	prefixes map[string][]netip.Prefix
}

func (p *podCIDRs) contains(a netip.Addr) bool {
	if p.synced != nil && !p.synced() {
		return true
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, ps := range p.prefixes {
		for _, pr := range ps {
			if pr.Contains(a.Unmap()) {
				return true
			}
		}
	}
	return false
}

func (p *podCIDRs) set(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	var ps []netip.Prefix
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if pr, err := netip.ParsePrefix(c); err == nil {
			ps = append(ps, pr)
		}
	}
	p.mu.Lock()
	p.prefixes[n.Name] = ps
	p.mu.Unlock()
}

func watchPodCIDRs(ctx context.Context, kube kubernetes.Interface) (*podCIDRs, error) {
	p := &podCIDRs{prefixes: map[string][]netip.Prefix{}}
	f := informers.NewSharedInformerFactory(kube, 0)
	inf := f.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.set,
		UpdateFunc: func(_, n any) { p.set(n) },
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				p.mu.Lock()
				delete(p.prefixes, n.Name)
				p.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, err
	}
	// Not waited for: until the Nodes are listed every one-sided record
	// may have a partner (contains says true), so none is released early.
	p.synced = inf.HasSynced
	f.Start(ctx.Done())
	return p, nil
}
