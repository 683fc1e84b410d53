package flowaggregator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/config"
	"antrea.io/antrea/pkg/flowtls"
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
	// GRPCAddress is the address of the gRPC collector (empty: none).
	GRPCAddress string
	// Kube reads the Nodes' Pod CIDRs so that records to or from outside
	// the cluster need not wait for a partner.
	Kube bool
}

// AddFlags registers the options.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", "", "flow-aggregator.conf (empty: the defaults)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the API server (empty: in-cluster)")
	fs.StringVar(&o.IPFIXAddress, "ipfix-address", ":"+strconv.Itoa(IPFIXPort), "address the IPFIX collector listens on, TCP and UDP")
	fs.StringVar(&o.GRPCAddress, "grpc-address", ":"+strconv.Itoa(GRPCPort), "address the gRPC collector (FlowExportService, over TLS) listens on; empty: none")
	fs.BoolVar(&o.Kube, "kube", true, "read the Nodes' Pod CIDRs from the API server (records of external peers are then not held for a partner)")
}

// Listen says where a started aggregator listens: IPFIX (TCP and UDP, or
// TLS; empty: none), the gRPC collector (empty: none) and the HTTP API.
type Listen struct{ IPFIX, GRPC, API string }

// Running is a started aggregator: its addresses and parts, for tests.
type Running struct {
	TCPAddr, UDPAddr net.Addr
	GRPCAddr         net.Addr
	APIAddr          net.Addr
	// PKI is the CA and certificates of the TLS transports (nil without
	// any).
	PKI        *flowtls.PKI
	Store      *Store
	Metrics    *Metrics
	Aggregator *Aggregator
	done       chan struct{}
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
	l := Listen{IPFIX: o.IPFIXAddress, GRPC: o.GRPCAddress, API: ":" + strconv.Itoa(cfg.APIServer.APIPort)}
	var pki *flowtls.PKI
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
		if cfg.needsTLS(l) {
			// A CA of its own for this run, published for the agents.
			ns := podNamespace()
			if pki, err = flowtls.New(cfg.tlsNames(ns)); err != nil {
				return fmt.Errorf("TLS certificates: %w", err)
			}
			go publishPKI(ctx, kube, ns, pki)
		}
	}
	r, err := Start(ctx, cfg, l, isPodIP, pki)
	if err != nil {
		return err
	}
	r.Wait()
	return nil
}

// Start starts the collectors, the aggregator, the exporters and the API
// and returns; they stop when ctx ends. The TLS transports (gRPC, IPFIX
// over TLS) use pki, or, when it is nil, a CA made here (tests read it from
// Running).
func Start(ctx context.Context, cfg Config, l Listen, isPodIP func(netip.Addr) bool, pki *flowtls.PKI) (*Running, error) {
	ipfixAddr, apiAddr := l.IPFIX, l.API
	var serverTLS *tls.Config
	if cfg.needsTLS(l) {
		if pki == nil {
			var err error
			if pki, err = flowtls.New(cfg.tlsNames(podNamespace())); err != nil {
				return nil, fmt.Errorf("TLS certificates: %w", err)
			}
		}
		var err error
		if serverTLS, err = pki.ServerConfig(); err != nil {
			return nil, err
		}
	}
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
	r := &Running{Store: store, Metrics: m, Aggregator: agg, PKI: pki, done: make(chan struct{})}
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
	if cfg.AggregatorTransportProtocol != "none" && ipfixAddr != "" {
		// Both transports listen whatever the key says: an agent's
		// flowCollectorAddr chooses, and the Service exposes both.
		var err error
		if tcpL, err = net.Listen("tcp", ipfixAddr); err != nil {
			return fail(fmt.Errorf("IPFIX collector: %w", err))
		}
		closers = append(closers, func() { tcpL.Close() })
		r.TCPAddr = tcpL.Addr()
		if cfg.AggregatorTransportProtocol == "tls" {
			// IPFIX over TLS on the TCP port, and no UDP (no DTLS).
			tcpL = tls.NewListener(tcpL, serverTLS)
		} else {
			udpAddr := ipfixAddr
			if host, port, err := net.SplitHostPort(ipfixAddr); err == nil && port == "0" {
				// The same port number on UDP as the kernel chose for TCP.
				udpAddr = net.JoinHostPort(host, strconv.Itoa(tcpL.Addr().(*net.TCPAddr).Port))
			}
			if udpC, err = net.ListenPacket("udp", udpAddr); err != nil {
				return fail(fmt.Errorf("IPFIX collector: %w", err))
			}
			closers = append(closers, func() { udpC.Close() })
			r.UDPAddr = udpC.LocalAddr()
		}
	}
	var grpcL net.Listener
	if l.GRPC != "" {
		var err error
		if grpcL, err = net.Listen("tcp", l.GRPC); err != nil {
			return fail(fmt.Errorf("gRPC collector: %w", err))
		}
		closers = append(closers, func() { grpcL.Close() })
		r.GRPCAddr = grpcL.Addr()
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
	}
	if udpC != nil {
		start(func(ctx context.Context) { col.serveUDP(ctx, udpC) })
	}
	if grpcL != nil {
		start(func(ctx context.Context) { serveGRPC(ctx, grpcL, serverTLS, agg, m) })
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
	klog.InfoS("Flow Aggregator started", "ipfixTCP", r.TCPAddr, "ipfixUDP", r.UDPAddr, "grpc", r.GRPCAddr, "api", r.APIAddr,
		"ipfixTLS", cfg.AggregatorTransportProtocol == "tls",
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

// ServiceName is the Flow Aggregator's Service (its manifest's), whose
// names its server certificate holds.
const ServiceName = "flow-aggregator"

// podNamespace is the aggregator's Namespace (POD_NAMESPACE, from the
// manifest's downward API), flow-aggregator when unset.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "flow-aggregator"
}

// needsTLS: the gRPC collector runs, or IPFIX comes over TLS.
func (c Config) needsTLS(l Listen) bool {
	return l.GRPC != "" || c.AggregatorTransportProtocol == "tls"
}

// tlsNames are the names of the server certificate: the Service's DNS
// names in namespace ns, and flowAggregatorAddress (a name or an IP).
func (c Config) tlsNames(ns string) []string {
	names := flowtls.ServiceNames(ns, ServiceName)
	if c.FlowAggregatorAddress != "" {
		names = append(names, c.FlowAggregatorAddress)
	}
	return names
}

// publishPKI writes the CA certificate to the ConfigMap flow-aggregator-ca
// and the agents' client certificate and key to the Secret
// flow-aggregator-client-tls, in namespace ns, retrying until it succeeds
// or ctx ends: the agents read them at every connection.
func publishPKI(ctx context.Context, kube kubernetes.Interface, ns string, pki *flowtls.PKI) {
	put := func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: flowtls.CAConfigMap, Namespace: ns,
			Labels: map[string]string{"app": "flow-aggregator"}}, Data: map[string]string{flowtls.CAKey: string(pki.CACert)}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("ConfigMap %s/%s: %w", ns, flowtls.CAConfigMap, err)
			}
		} else if err != nil {
			return fmt.Errorf("ConfigMap %s/%s: %w", ns, flowtls.CAConfigMap, err)
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: flowtls.ClientSecret, Namespace: ns,
			Labels: map[string]string{"app": "flow-aggregator"}}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{flowtls.CertKey: pki.ClientCert, flowtls.KeyKey: pki.Client, flowtls.CAKey: pki.CACert}}
		if _, err := kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("secret %s/%s: %w", ns, flowtls.ClientSecret, err)
			}
		} else if err != nil {
			return fmt.Errorf("secret %s/%s: %w", ns, flowtls.ClientSecret, err)
		}
		return nil
	}
	for {
		err := put()
		if err == nil {
			klog.InfoS("Published the TLS CA and the agents' client certificate", "configMap", ns+"/"+flowtls.CAConfigMap,
				"secret", ns+"/"+flowtls.ClientSecret)
			return
		}
		klog.ErrorS(err, "Could not publish the TLS CA for the agents; retrying in 10s")
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}
