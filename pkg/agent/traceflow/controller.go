// Package traceflow is the agent's side of Traceflow (crd.antrea.io/v1beta1,
// see pkg/controller/traceflow for the phases). Every agent installs, for
// each running Traceflow, the flows of its data-plane tag (pkg/agent/openflow,
// traceflow.go): copies of the flows that decide a packet's fate which send
// the agent a packet-in when a packet carrying the tag meets them. The agent
// of the source Pod's Node then injects the traced packet at the Pod's OVS
// port (a packet-out built from spec.packet, the Pod's IP and MAC and the
// destination's IP: the Pod's, the Service's ClusterIP, or spec.destination.ip;
// IPv4 or IPv6 as pkg/util/traceflowip picks, the tag in the DSCP bits of either),
// or, with spec.liveTraffic, tags the Pod's next matching packet. Each agent
// collects the packet-ins of the tagged packet until one ends its path on
// that Node (output to a Pod, the gateway or the tunnel, or a drop), turns
// them into observations and merges its Node's result into the Traceflow's
// status (retried on conflict). The flows go when the Traceflow is no longer
// running. A packet that reached a Node whose agent had not installed the
// tag's flows yet goes unreported: the sender injects again while the
// Traceflow runs, after 250 ms, then twice as long each time up to
// ReinjectInterval (a Node's result is replaced, never duplicated).
package traceflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	agenttypes "antrea.io/antrea/pkg/agent/types"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/util/namequeue"
	"antrea.io/antrea/pkg/util/traceflowip"
)

// DefaultReinjectInterval is how often the sender injects the packet again
// while the Traceflow runs.
const DefaultReinjectInterval = 2 * time.Second

// ClientQPS and ClientBurst: see pkg/controller/traceflow.
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// maxInjections bounds the packets one Traceflow injects.
const maxInjections = 10

// Flows is what the agent's OpenFlow client does for Traceflow.
type Flows interface {
	InstallTraceflowFlows(ctx context.Context, spec agentof.TraceflowFlows) error
	UninstallTraceflowFlows(ctx context.Context, tag uint8) error
	StopTraceflowLive(ctx context.Context, tag uint8) error
	ParseTraceflowPacketIn(pi *binding.PacketIn) (agentof.TraceflowPacketIn, bool)
}

// Rules names policy rules and isolating policies (the agent's
// NetworkPolicy controller).
type Rules interface {
	TraceflowRule(id uint32) (policy, rule string, ok bool)
	TraceflowIsolation(port uint32, d agentof.Direction) []string
	TraceflowL7Rule(id uint16) (policy, rule string, ok bool)
}

// Config is what the controller needs.
type Config struct {
	NodeName string
	// Client writes the Traceflows' status; Kube reads destination Pods
	// and Services.
	Client versioned.Interface
	Kube   kubernetes.Interface
	// Informer watches Traceflows.
	Informer crdinformers.TraceflowInformer
	Flows    Flows
	// IO is where the controller registers its handler of the packet-ins
	// of kind PacketInTraceflow, and sends the packet-outs.
	IO         agentof.PacketInRouter
	Interfaces interfacestore.InterfaceStore
	// Rules may be nil (no NetworkPolicy controller): rules go unnamed.
	Rules      Rules
	Ports      Ports
	GatewayMAC net.HardwareAddr
	// ReinjectInterval (default DefaultReinjectInterval).
	ReinjectInterval time.Duration
}

// running is a Traceflow this agent traces.
type running struct {
	name        string
	uid         types.UID
	tag         uint8
	sender      bool
	live        bool
	droppedOnly bool
	// pending are the packet-ins of the packet on its way through this
	// node's pipeline (the terminal one closes it).
	pending []*agentof.TraceflowPacketIn
	cancel  context.CancelFunc
	// captured is set once a live packet was reported (under the
	// Controller's mu).
	captured bool
	// srcs are the traced packet's source's addresses (it is of one of
	// them): packet-ins of other packets with the tag (a pod's echo reply
	// copies the request's DSCP, or traffic class) are not the traced
	// packet's.
	srcs []netip.Addr
}

// Controller traces the running Traceflows on this node.
type Controller struct {
	cfg    Config
	lister crdlisters.TraceflowLister
	synced cache.InformerSynced
	queue  *namequeue.Queue

	mu     sync.Mutex
	byName map[string]*running
	byTag  map[uint8]*running
	// writes counts status writes in flight (tests wait for them).
	writes sync.WaitGroup
}

// NewController makes the controller; Run starts it.
func NewController(cfg Config) *Controller {
	if cfg.ReinjectInterval == 0 {
		cfg.ReinjectInterval = DefaultReinjectInterval
	}
	c := &Controller{
		cfg:    cfg,
		lister: cfg.Informer.Lister(),
		synced: cfg.Informer.Informer().HasSynced,
		byName: map[string]*running{},
		byTag:  map[uint8]*running{},
	}
	c.queue = namequeue.New("Traceflow", cfg.Informer.Informer(), c.sync)
	return c
}

// Run traces until ctx ends; it removes the flows of every Traceflow it
// traced on the way out.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	c.cfg.IO.Handle(agentof.PacketInTraceflow, c.tracedPacketIn)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.queue.Run(ctx)
	c.mu.Lock()
	names := make([]string, 0, len(c.byName))
	for n := range c.byName {
		names = append(names, n)
	}
	c.mu.Unlock()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range names {
		c.stop(stopCtx, n)
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	tf, err := c.lister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.mu.Lock()
	r := c.byName[name]
	c.mu.Unlock()
	if tf == nil || tf.Status.Phase != crdv1beta1.TraceflowRunning || tf.Status.DataplaneTag <= 0 {
		if r != nil {
			c.stop(ctx, name)
		}
		return nil
	}
	if r != nil {
		if r.uid == tf.UID && r.tag == uint8(tf.Status.DataplaneTag) {
			return nil
		}
		c.stop(ctx, name) // a new object of the same name
	}
	return c.start(ctx, tf)
}

// start installs a Traceflow's flows and, on the source Pod's node,
// injects its packet (or tags live traffic).
func (c *Controller) start(ctx context.Context, tf *crdv1beta1.Traceflow) error {
	tag := uint8(tf.Status.DataplaneTag)
	c.mu.Lock()
	if other := c.byTag[tag]; other != nil {
		// The controller gave the tag to a new Traceflow while this agent
		// still traces an ended one: the old one goes.
		c.mu.Unlock()
		c.stop(ctx, other.name)
		c.mu.Lock()
	}
	c.mu.Unlock()
	src := tf.Spec.Source
	var srcIface *interfacestore.InterfaceConfig
	if src.Pod != "" {
		if ifs := c.cfg.Interfaces.GetContainerInterfacesByPod(src.Pod, src.Namespace); len(ifs) > 0 {
			srcIface = ifs[0]
		}
	}
	r := &running{name: tf.Name, uid: tf.UID, tag: tag, sender: srcIface != nil, live: tf.Spec.LiveTraffic,
		droppedOnly: tf.Spec.DroppedOnly}
	r.srcs = c.sourceAddrs(ctx, tf, srcIface)
	spec := agentof.TraceflowFlows{Tag: tag, Timeout: timeout(tf), DroppedOnly: tf.Spec.DroppedOnly}
	var dst *destination
	if r.sender || r.live {
		src := traceflowip.End{What: "spec.source.ip", Addrs: r.srcs, Given: true}
		if tf.Spec.Source.Pod != "" {
			src = traceflowip.End{What: fmt.Sprintf("source Pod %s/%s", tf.Spec.Source.Namespace, tf.Spec.Source.Pod), Addrs: r.srcs}
		}
		d, err := c.destination(ctx, tf, src)
		if err != nil {
			return err
		}
		dst = d
	}
	if r.live {
		live, local := c.liveMatch(tf, srcIface, dst)
		if local {
			spec.Live = live
			r.sender = srcIface != nil
		}
	}
	if err := c.cfg.Flows.InstallTraceflowFlows(ctx, spec); err != nil {
		return err
	}
	injectCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	c.mu.Lock()
	c.byName[tf.Name], c.byTag[tag] = r, r
	c.mu.Unlock()
	if r.sender && !r.live {
		klog.InfoS("Tracing", "traceflow", tf.Name, "tag", tag, "sender", r.sender, "live", r.live, "src", dst.src, "dst", dst.ip)
		frame := &Frame{SrcMAC: srcIface.MAC, DstMAC: dst.mac, Src: dst.src, Dst: dst.ip, Tag: tag, Packet: tf.Spec.Packet,
			ServicePort: dst.port, ServiceProto: dst.proto}
		go c.inject(injectCtx, tf.Name, uint32(srcIface.OFPort), frame)
	} else {
		klog.InfoS("Tracing", "traceflow", tf.Name, "tag", tag, "sender", r.sender, "live", r.live)
	}
	return nil
}

// sourceAddrs are the addresses the traced packet may come from: the
// local source Pod's, spec.source.ip, or the source Pod's PodIPs.
func (c *Controller) sourceAddrs(ctx context.Context, tf *crdv1beta1.Traceflow, local *interfacestore.InterfaceConfig) []netip.Addr {
	switch s := tf.Spec.Source; {
	case local != nil:
		var out []netip.Addr
		for _, ip := range local.IPs {
			if a := agenttypes.Addr(ip); a.IsValid() {
				out = append(out, a)
			}
		}
		return out
	case s.IP != "":
		return traceflowip.Addrs(s.IP)
	case s.Pod != "":
		pod, err := c.cfg.Kube.CoreV1().Pods(s.Namespace).Get(ctx, s.Pod, metav1.GetOptions{})
		if err != nil {
			klog.ErrorS(err, "Cannot read the Traceflow's source Pod", "traceflow", tf.Name)
			return nil
		}
		return traceflowip.PodAddrs(pod)
	}
	return nil
}

func timeout(tf *crdv1beta1.Traceflow) time.Duration {
	if tf.Spec.Timeout > 0 {
		return time.Duration(tf.Spec.Timeout) * time.Second
	}
	return 20 * time.Second
}

// destination is where the traced packet goes, and from which of the
// source's addresses (traceflowip.Pick: of the packet's family).
type destination struct {
	ip, src netip.Addr
	mac     net.HardwareAddr
	port    uint16
	proto   uint8
}

func (c *Controller) destination(ctx context.Context, tf *crdv1beta1.Traceflow, src traceflowip.End) (*destination, error) {
	d := tf.Spec.Destination
	out := &destination{mac: c.cfg.GatewayMAC}
	var dst traceflowip.End
	switch {
	case d.Pod != "":
		pod, err := c.cfg.Kube.CoreV1().Pods(d.Namespace).Get(ctx, d.Pod, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("destination Pod %s/%s: %w", d.Namespace, d.Pod, err)
		}
		dst = traceflowip.End{What: fmt.Sprintf("destination Pod %s/%s", d.Namespace, d.Pod), Addrs: traceflowip.PodAddrs(pod)}
	case d.Service != "":
		svc, err := c.cfg.Kube.CoreV1().Services(d.Namespace).Get(ctx, d.Service, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("destination Service %s/%s: %w", d.Namespace, d.Service, err)
		}
		dst = traceflowip.End{What: fmt.Sprintf("destination Service %s/%s", d.Namespace, d.Service),
			Addrs: traceflowip.ServiceAddrs(svc)}
		if len(svc.Spec.Ports) > 0 {
			p := svc.Spec.Ports[0]
			out.port = uint16(p.Port)
			switch p.Protocol {
			case corev1.ProtocolUDP:
				out.proto = protoUDP
			default:
				out.proto = protoTCP
			}
		}
	default:
		dst = traceflowip.End{What: "spec.destination.ip", Addrs: traceflowip.Addrs(d.IP), Given: true}
	}
	if len(dst.Addrs) == 0 {
		return nil, fmt.Errorf("destination of Traceflow %s has no IP address", tf.Name)
	}
	_, srcIP, dstIP, err := traceflowip.Pick(&tf.Spec.Packet, src, dst)
	if err != nil {
		return nil, fmt.Errorf("traceflow %s: %w", tf.Name, err)
	}
	out.ip, out.src = dstIP, srcIP
	if d.Service == "" {
		if iface, ok := c.cfg.Interfaces.GetInterfaceByIP(dstIP.String()); ok && iface.MAC != nil {
			out.mac = iface.MAC
		}
	}
	return out, nil
}

// liveMatch is the match of live traffic, and whether this node tags it:
// the source Pod's node, or, with only a source IP, the destination Pod's.
func (c *Controller) liveMatch(tf *crdv1beta1.Traceflow, srcIface *interfacestore.InterfaceConfig, dst *destination) (*agentof.TraceflowLive, bool) {
	l := &agentof.TraceflowLive{Dst: dst.ip}
	switch {
	case srcIface != nil:
		l.Src = dst.src
	case tf.Spec.Source.IP != "":
		if _, local := c.cfg.Interfaces.GetInterfaceByIP(dst.ip.String()); !local {
			return nil, false
		}
		l.Src = dst.src
	default:
		return nil, false
	}
	p := tf.Spec.Packet
	icmp := uint8(protoICMP)
	if dst.ip.Is6() {
		icmp = protoICMPv6
		if h := p.IPv6Header; h != nil && h.NextHeader != nil {
			l.Proto = uint8(*h.NextHeader)
		}
	} else if p.IPHeader != nil {
		l.Proto = uint8(p.IPHeader.Protocol)
	}
	switch th := p.TransportHeader; {
	case th.TCP != nil:
		l.Proto, l.SrcPort, l.DstPort = protoTCP, uint16(th.TCP.SrcPort), uint16(th.TCP.DstPort)
	case th.UDP != nil:
		l.Proto, l.SrcPort, l.DstPort = protoUDP, uint16(th.UDP.SrcPort), uint16(th.UDP.DstPort)
	case th.ICMP != nil:
		l.Proto = icmp
	}
	return l, true
}

// inject sends the packet, and again while the Traceflow runs: after an
// eighth of ReinjectInterval, then twice as long each time up to
// ReinjectInterval (the agents of other nodes install the tag's flows when
// they see the Traceflow running, which may be a little after this one).
func (c *Controller) inject(ctx context.Context, name string, port uint32, f *Frame) {
	wait := c.cfg.ReinjectInterval / 8
	for i := 0; i < maxInjections; i++ {
		data, err := f.Build()
		if err != nil {
			klog.ErrorS(err, "Cannot build the Traceflow packet", "traceflow", name)
			return
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = c.cfg.IO.SendPacketOut(sctx, agentof.TraceflowPacketOut(port, data))
		cancel()
		if err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Cannot inject the Traceflow packet", "traceflow", name, "port", port)
		} else {
			klog.V(2).InfoS("Injected the Traceflow packet", "traceflow", name, "port", port, "attempt", i+1)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, c.cfg.ReinjectInterval)
	}
}

// stop removes a Traceflow's flows.
func (c *Controller) stop(ctx context.Context, name string) {
	c.mu.Lock()
	r := c.byName[name]
	if r == nil {
		c.mu.Unlock()
		return
	}
	delete(c.byName, name)
	if c.byTag[r.tag] == r {
		delete(c.byTag, r.tag)
	}
	c.mu.Unlock()
	r.cancel()
	if err := c.cfg.Flows.UninstallTraceflowFlows(ctx, r.tag); err != nil {
		klog.ErrorS(err, "Could not remove the Traceflow flows", "traceflow", name, "tag", r.tag)
		return
	}
	klog.InfoS("Stopped tracing", "traceflow", name, "tag", r.tag)
}

// tracedPacketIn collects a packet-in of a traced packet.
func (c *Controller) tracedPacketIn(ctx context.Context, pi *binding.PacketIn) {
	tpi, ok := c.cfg.Flows.ParseTraceflowPacketIn(pi)
	if !ok {
		return
	}
	c.handle(ctx, &tpi)
}

// handle adds a packet-in to its Traceflow's packet; a terminal one
// reports the packet's path on this node.
func (c *Controller) handle(ctx context.Context, pi *agentof.TraceflowPacketIn) {
	c.mu.Lock()
	r := c.byTag[pi.Tag]
	if r == nil {
		c.mu.Unlock()
		return
	}
	if p, err := packetreply.Parse(pi.Packet.Data); err != nil || len(r.srcs) > 0 && !slices.Contains(r.srcs, p.Src) {
		c.mu.Unlock()
		return
	}
	r.pending = append(r.pending, pi)
	if !terminal(pi) {
		c.mu.Unlock()
		return
	}
	pins := r.pending
	r.pending = nil
	sender := r.sender && pins[0].Source != agentof.FromTunnel
	name, uid, live, droppedOnly := r.name, r.uid, r.live, r.droppedOnly
	c.mu.Unlock()
	obs := Observe(pins, sender, c.cfg.Ports, c)
	if droppedOnly && !dropped(obs) {
		return
	}
	// A live Traceflow reports the first packet it captures on this node,
	// once: the packets tagged after it (the connection's next segments,
	// until the tag flow is gone) would race its write with no capture.
	var captured *crdv1beta1.Packet
	if live {
		c.mu.Lock()
		already := r.captured
		r.captured = true
		c.mu.Unlock()
		if already {
			return
		}
		if p, err := Captured(pins[0].Packet.Data); err == nil {
			captured = p
		}
		if sender {
			if err := c.cfg.Flows.StopTraceflowLive(ctx, pi.Tag); err != nil {
				klog.ErrorS(err, "Could not remove the live-traffic tag flow", "traceflow", name)
			}
		}
	}
	role := crdv1beta1.RoleReceiver
	if sender {
		role = crdv1beta1.RoleSender
	}
	res := crdv1beta1.NodeResult{Node: c.cfg.NodeName, Role: role, Timestamp: time.Now().Unix(), Observations: obs}
	c.writes.Add(1)
	go func() {
		defer c.writes.Done()
		if err := c.writeResult(ctx, name, uid, res, captured); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Could not write the Traceflow result", "traceflow", name)
		}
	}()
}

func dropped(obs []crdv1beta1.Observation) bool {
	for _, o := range obs {
		if o.Action == crdv1beta1.ActionDropped || o.Action == crdv1beta1.ActionRejected {
			return true
		}
	}
	return false
}

// writeResult merges this node's result into the status, retried on
// conflict (other agents and the controller write it too).
func (c *Controller) writeResult(ctx context.Context, name string, uid types.UID, res crdv1beta1.NodeResult, captured *crdv1beta1.Packet) error {
	tfs := c.cfg.Client.CrdV1beta1().Traceflows()
	first := true
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		// The informer's copy first (one request when it is current),
		// the API server's after a conflict.
		var tf *crdv1beta1.Traceflow
		var err error
		if first {
			first = false
			tf, err = c.lister.Get(name)
		}
		if tf == nil || err != nil {
			tf, err = tfs.Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		// A receiver's result may finish the Traceflow (the controller
		// sets Succeeded) before the sender's lands: the sender's result
		// still goes in. A failed Traceflow takes no more results.
		if tf.UID != uid || tf.Status.Phase != crdv1beta1.TraceflowRunning && tf.Status.Phase != crdv1beta1.TraceflowSucceeded {
			return nil
		}
		tf = tf.DeepCopy()
		MergeResult(&tf.Status, res)
		if captured != nil && tf.Status.CapturedPacket == nil {
			tf.Status.CapturedPacket = captured
		}
		_, err = tfs.UpdateStatus(ctx, tf, metav1.UpdateOptions{})
		if err == nil {
			klog.InfoS("Reported Traceflow observations", "traceflow", name, "role", res.Role, "observations", len(res.Observations))
		}
		return err
	})
}

// Rule implements Namer.
func (c *Controller) Rule(id uint32) (string, string, bool) {
	if c.cfg.Rules == nil {
		return "", "", false
	}
	return c.cfg.Rules.TraceflowRule(id)
}

// L7Rule implements Namer.
func (c *Controller) L7Rule(id uint16) (string, string, bool) {
	if c.cfg.Rules == nil {
		return "", "", false
	}
	return c.cfg.Rules.TraceflowL7Rule(id)
}

// Isolation implements Namer.
func (c *Controller) Isolation(port uint32, d agentof.Direction) []string {
	if c.cfg.Rules == nil {
		return nil
	}
	return c.cfg.Rules.TraceflowIsolation(port, d)
}

// PodOfPort implements Namer.
func (c *Controller) PodOfPort(port uint32) string {
	if iface, ok := c.cfg.Interfaces.GetInterfaceByOFPort(int32(port)); ok && iface.PodName != "" {
		return iface.PodNamespace + "/" + iface.PodName
	}
	return ""
}
