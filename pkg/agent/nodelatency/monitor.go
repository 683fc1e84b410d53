package nodelatency

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
)

// Reporter sends a Node's report (the stats client's NodeLatencyStats).
type Reporter interface {
	Create(ctx context.Context, s *statsv1alpha1.NodeLatencyStats, opts metav1.CreateOptions) (*statsv1alpha1.NodeLatencyStats, error)
}

// Config is what the Monitor reads and writes.
type Config struct {
	NodeName       string
	Nodes          corelisters.NodeLister
	NodesSynced    cache.InformerSynced
	Monitors       crdlisters.NodeLatencyMonitorLister
	MonitorsSynced cache.InformerSynced
	Reporter       Reporter
	Listen         ListenFunc // nil: icmp.ListenPacket
}

// Monitor probes the peers while the NodeLatencyMonitor exists and reports
// after each round. The sockets are open only while it exists.
type Monitor struct {
	cfg Config
}

// NewMonitor returns a Monitor; Run runs it.
func NewMonitor(cfg Config) *Monitor { return &Monitor{cfg: cfg} }

// offPoll is how often the Monitor looks for the CR while there is none (a
// lister read, no API call).
const offPoll = time.Second

// Run probes and reports until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), m.cfg.NodesSynced, m.cfg.MonitorsSynced) {
		return
	}
	var p *Prober
	defer func() {
		if p != nil {
			p.Close()
		}
	}()
	for ctx.Err() == nil {
		interval, on := m.interval()
		if !on {
			if p != nil {
				klog.InfoS("NodeLatencyMonitor deleted; stopping the probes")
				p.Close()
				p = nil
			}
			sleep(ctx, offPoll)
			continue
		}
		if p == nil {
			var err error
			if p, err = NewProber(m.cfg.Listen); err != nil {
				klog.ErrorS(err, "Cannot start the latency probes; retrying")
				sleep(ctx, interval)
				continue
			}
			klog.InfoS("NodeLatencyMonitor found; probing the peers", "interval", interval)
			// Jitter: agents started together do not probe at the same instant.
			sleep(ctx, rand.N(interval))
		}
		p.SetTargets(m.targets())
		p.Round(ctx)
		sleep(ctx, interval)
		m.report(ctx, p)
	}
}

// interval is the CR's pingIntervalSeconds; false when there is no CR.
func (m *Monitor) interval() (time.Duration, bool) {
	nlm, err := m.cfg.Monitors.Get(crdv1alpha1.NodeLatencyMonitorName)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "Cannot read the NodeLatencyMonitor")
		}
		return 0, false
	}
	s := max(nlm.Spec.PingIntervalSeconds, crdv1alpha1.MinPingIntervalSeconds)
	return time.Duration(s) * time.Second, true
}

// targets are the other Nodes' gateway IPs.
func (m *Monitor) targets() []Target {
	nodes, err := m.cfg.Nodes.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list the Nodes")
		return nil
	}
	var ts []Target
	for _, n := range nodes {
		if n.Name != m.cfg.NodeName {
			ts = append(ts, GatewayTargets(n)...)
		}
	}
	return ts
}

// GatewayTargets are a Node's gateway IPs, as upstream probes them: the first
// address of each of its pod CIDRs (one per family).
func GatewayTargets(n *corev1.Node) []Target {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	var ts []Target
	for _, c := range cidrs {
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			klog.ErrorS(err, "Ignoring a pod CIDR", "node", n.Name, "cidr", c)
			continue
		}
		ts = append(ts, Target{Node: n.Name, IP: pfx.Masked().Addr().Next()})
	}
	return ts
}

// report sends the prober's book as this Node's NodeLatencyStats.
func (m *Monitor) report(ctx context.Context, p *Prober) {
	s := &statsv1alpha1.NodeLatencyStats{ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName},
		PeerNodeLatencyStats: p.book.stats()}
	if _, err := m.cfg.Reporter.Create(ctx, s, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "Cannot report NodeLatencyStats", "node", m.cfg.NodeName)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
