// Package multicast is the agent's multicast controller (multicast.enable):
// IGMP snooping of the local pods, the node's memberships published to
// the other nodes, and the OpenFlow groups that deliver a group's packets
// to its local members and, through the tunnel, to the nodes with members.
//
// Its parts: the IGMP codec (igmp.go: reports and leaves read, general
// queries built); the membership table (group -> local member port -> last
// report), changed by the IGMP packet-ins the pipeline sends
// (openflow.PacketInIGMP) and expired when a member stops answering the
// periodic queries; the publication of the node's groups in its Node's
// annotation NodeGroupsAnnotation, read back from every other Node; and
// sync, which makes the datapath's groups and flows (openflow's multicast
// feature) those of the table and the other Nodes' annotations. One
// mutex guards the table; sync runs in the controller's one goroutine.
// docs/design/multicast.md says why memberships travel through the API.
package multicast

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/openflow"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// NodeGroupsAnnotation is the Node annotation in which each agent
// publishes the multicast groups its local pods joined (sorted, comma
// separated): the other agents send the groups' packets to the Nodes
// whose annotation names them.
const NodeGroupsAnnotation = "multicast.antrea.io/groups"

// resyncPeriod is how often sync runs without a change (pods' new ports
// get their counter flows, departed pods' memberships go).
const resyncPeriod = 5 * time.Second

// Flows is what the controller needs of the OpenFlow client.
type Flows interface {
	SetMulticastFlows(ctx context.Context, want openflow.MulticastFlows) error
	MulticastPodStats(ctx context.Context) (map[uint32]openflow.MulticastCounters, error)
}

// Policy decides IGMP policy rules (the policy controller's IGMPAllowed):
// whether a local pod may send an IGMP report or leave (egress) or receive
// a query (ingress).
type Policy interface {
	IGMPAllowed(namespace, name string, egress bool, igmpType uint8, group netip.Addr) bool
}

// Config is what the controller works with.
type Config struct {
	NodeName   string
	Kube       kubernetes.Interface
	Nodes      cache.SharedIndexInformer
	Interfaces interfacestore.InterfaceStore
	Flows      Flows
	IO         openflow.PacketInRouter
	// Policy, if set, decides the IGMP policy rules.
	Policy Policy
	// GatewayIP and GatewayMAC are the queries' source.
	GatewayIP  net.IP
	GatewayMAC net.HardwareAddr
	// QueryInterval is igmpQueryInterval: how often the local pods are
	// asked for their memberships; a membership not reported for three
	// intervals expires.
	QueryInterval time.Duration
	// QueryVersions are igmpQueryVersions: the IGMP versions of the
	// general queries sent.
	QueryVersions []int
	// Purge, if set, flushes the datapath's cached flows after a change.
	Purge func(context.Context) error
}

// Controller is the multicast controller.
type Controller struct {
	cfg  Config
	now  func() time.Time
	kick chan struct{}

	mu sync.Mutex
	// members: group -> local member port -> last report.
	members map[netip.Addr]map[uint32]time.Time

	// published is the node's groups as last written in its annotation;
	// applied the last flows written. Both are sync's alone.
	published string
	applied   *openflow.MulticastFlows
}

// NewController returns a controller; Run starts it.
func NewController(cfg Config) *Controller {
	return &Controller{cfg: cfg, now: time.Now, kick: make(chan struct{}, 1),
		members: map[netip.Addr]map[uint32]time.Time{}}
}

// SetPolicy makes p decide the IGMP policy rules (before Run).
func (c *Controller) SetPolicy(p Policy) { c.cfg.Policy = p }

func (c *Controller) trigger() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run handles IGMP packet-ins, sends the queries and syncs until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.cfg.IO.Handle(openflow.PacketInIGMP, c.handleIGMP)
	if c.cfg.Nodes != nil {
		_, err := c.cfg.Nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.trigger() },
			UpdateFunc: func(old, cur any) { c.nodeChanged(old, cur) },
			DeleteFunc: func(any) { c.trigger() },
		})
		if err != nil {
			klog.ErrorS(err, "Cannot watch Nodes for their multicast groups")
		}
		cache.WaitForCacheSync(ctx.Done(), c.cfg.Nodes.HasSynced)
	}
	klog.InfoS("Multicast controller started", "queryInterval", c.cfg.QueryInterval, "queryVersions", c.cfg.QueryVersions)
	// A restarted agent asks at once: members answer within 10 s.
	c.query(ctx)
	queries := time.NewTicker(c.cfg.QueryInterval)
	defer queries.Stop()
	resync := time.NewTicker(resyncPeriod)
	defer resync.Stop()
	for {
		c.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-queries.C:
			c.query(ctx)
		case <-resync.C:
		case <-c.kick:
		}
	}
}

// nodeChanged syncs when another Node's groups or address changed.
func (c *Controller) nodeChanged(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 || o.Annotations[NodeGroupsAnnotation] != n.Annotations[NodeGroupsAnnotation] ||
		!reflect.DeepEqual(o.Status.Addresses, n.Status.Addresses) {
		c.trigger()
	}
}

// handleIGMP records the memberships of an IGMP message a local pod sent.
func (c *Controller) handleIGMP(_ context.Context, pi *binding.PacketIn) {
	in, ok := pi.Match.Get(binding.FieldInPort)
	if !ok {
		return
	}
	port := uint32(in.Value.Lo)
	ms, err := parseIGMP(pi.Data)
	if err != nil {
		klog.V(2).InfoS("Ignored an IGMP packet-in", "port", port, "err", err)
	}
	ms = c.allowed(port, ms)
	if c.record(port, ms) {
		c.trigger()
	}
}

// allowed keeps the memberships the IGMP egress rules let port's pod
// declare (all without a Policy, or for a port that is no pod's).
func (c *Controller) allowed(port uint32, ms []membership) []membership {
	if c.cfg.Policy == nil || len(ms) == 0 {
		return ms
	}
	i, ok := c.cfg.Interfaces.GetInterfaceByOFPort(int32(port))
	if !ok || i.ContainerInterfaceConfig == nil {
		return ms
	}
	var out []membership
	for _, m := range ms {
		if c.cfg.Policy.IGMPAllowed(i.PodNamespace, i.PodName, true, m.typ, m.group) {
			out = append(out, m)
			continue
		}
		klog.InfoS("An IGMP egress rule drops a pod's report", "pod", i.PodNamespace+"/"+i.PodName, "group", m.group, "type", m.typ, "join", m.join)
	}
	return out
}

// record applies memberships of port and says whether a group gained or
// lost a member.
func (c *Controller) record(port uint32, ms []membership) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	now := c.now()
	for _, m := range ms {
		ports := c.members[m.group]
		if m.join {
			if ports == nil {
				ports = map[uint32]time.Time{}
				c.members[m.group] = ports
			}
			if _, had := ports[port]; !had {
				changed = true
				klog.InfoS("Pod joined multicast group", "group", m.group, "port", port)
			}
			ports[port] = now
			continue
		}
		if _, had := ports[port]; had {
			delete(ports, port)
			changed = true
			klog.InfoS("Pod left multicast group", "group", m.group, "port", port)
			if len(ports) == 0 {
				delete(c.members, m.group)
			}
		}
	}
	return changed
}

// query sends the general queries to every local pod.
func (c *Controller) query(ctx context.Context) {
	var acts []binding.Action
	for _, i := range c.cfg.Interfaces.GetInterfacesByType(interfacestore.ContainerInterface) {
		if i.OVSPortConfig == nil || i.OFPort <= 0 {
			continue
		}
		if c.cfg.Policy != nil && i.ContainerInterfaceConfig != nil &&
			!c.cfg.Policy.IGMPAllowed(i.PodNamespace, i.PodName, false, igmpQuery, netip.IPv4Unspecified()) {
			continue // an IGMP ingress rule drops the queries to it
		}
		acts = append(acts, &binding.Output{Port: uint32(i.OFPort)})
	}
	if len(acts) == 0 {
		return
	}
	for _, v := range c.cfg.QueryVersions {
		frame, err := queryFrame(v, c.cfg.GatewayIP, c.cfg.GatewayMAC, c.cfg.QueryInterval)
		if err != nil {
			klog.ErrorS(err, "Cannot build an IGMP query", "version", v)
			continue
		}
		if err := c.cfg.IO.SendPacketOut(ctx, &binding.PacketOut{Actions: acts, Data: frame}); err != nil {
			klog.ErrorS(err, "Cannot send an IGMP query", "version", v, "pods", len(acts))
		}
	}
}

// podPorts are the ports of the local pods.
func (c *Controller) podPorts() []uint32 {
	var out []uint32
	for _, i := range c.cfg.Interfaces.GetInterfacesByType(interfacestore.ContainerInterface) {
		if i.OVSPortConfig != nil && i.OFPort > 0 {
			out = append(out, uint32(i.OFPort))
		}
	}
	slices.Sort(out)
	return out
}

// localGroups expires memberships (not reported for three query
// intervals, or of a port no longer a pod's) and returns the groups with
// local members and their ports.
func (c *Controller) localGroups(pods []uint32) map[netip.Addr][]uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline := c.now().Add(-3 * c.cfg.QueryInterval)
	out := map[netip.Addr][]uint32{}
	for g, ports := range c.members {
		for p, last := range ports {
			if last.Before(deadline) || !slices.Contains(pods, p) {
				delete(ports, p)
				klog.InfoS("Multicast membership expired", "group", g, "port", p)
				continue
			}
			out[g] = append(out[g], p)
		}
		if len(ports) == 0 {
			delete(c.members, g)
			continue
		}
		slices.Sort(out[g])
	}
	return out
}

// remoteGroups are, by group, the transport addresses of the other Nodes
// whose annotation names it.
func (c *Controller) remoteGroups() map[netip.Addr][]net.IP {
	out := map[netip.Addr][]net.IP{}
	if c.cfg.Nodes == nil {
		return out
	}
	for _, obj := range c.cfg.Nodes.GetStore().List() {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name == c.cfg.NodeName || n.Annotations[NodeGroupsAnnotation] == "" {
			continue
		}
		ip := internalIPv4(n)
		if ip == nil {
			continue
		}
		for _, s := range strings.Split(n.Annotations[NodeGroupsAnnotation], ",") {
			if g, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && g.Is4() && g.IsMulticast() {
				out[g] = append(out[g], ip)
			}
		}
	}
	return out
}

func internalIPv4(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(a.Address).To4(); ip != nil {
				return ip
			}
		}
	}
	return nil
}

// sync makes the datapath and the Node's annotation those of the
// memberships and the other Nodes' groups.
func (c *Controller) sync(ctx context.Context) {
	pods := c.podPorts()
	local := c.localGroups(pods)
	remote := c.remoteGroups()
	names := make([]string, 0, len(local))
	for g := range local {
		names = append(names, g.String())
	}
	slices.SortFunc(names, func(a, b string) int {
		return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b))
	})
	if pub := strings.Join(names, ","); pub != c.published {
		if err := c.publish(ctx, pub); err != nil {
			klog.ErrorS(err, "Cannot publish the node's multicast groups", "node", c.cfg.NodeName)
		} else {
			c.published = pub
		}
	}
	want := openflow.MulticastFlows{PodPorts: pods}
	all := map[netip.Addr]bool{}
	for g := range local {
		all[g] = true
	}
	for g := range remote {
		all[g] = true
	}
	groups := make([]netip.Addr, 0, len(all))
	for g := range all {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b netip.Addr) int { return a.Compare(b) })
	for _, g := range groups {
		nodes := remote[g]
		slices.SortFunc(nodes, func(a, b net.IP) int { return strings.Compare(a.String(), b.String()) })
		want.Groups = append(want.Groups, openflow.MulticastGroup{Group: g, LocalPorts: local[g], RemoteNodes: nodes})
	}
	if c.applied != nil && reflect.DeepEqual(*c.applied, want) {
		return
	}
	if err := c.cfg.Flows.SetMulticastFlows(ctx, want); err != nil {
		klog.ErrorS(err, "Cannot write the multicast flows", "groups", len(want.Groups))
		return
	}
	c.applied = &want
	if c.cfg.Purge != nil {
		if err := c.cfg.Purge(ctx); err != nil {
			klog.ErrorS(err, "Cannot purge the datapath's cached flows after a multicast change")
		}
	}
	klog.V(2).InfoS("Multicast flows written", "groups", len(want.Groups), "pods", len(pods))
}

// publish writes the node's groups into its Node's annotation (removed
// when empty).
func (c *Controller) publish(ctx context.Context, groups string) error {
	if c.cfg.Kube == nil {
		return nil
	}
	var v any = groups
	if groups == "" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{NodeGroupsAnnotation: v}}})
	if err != nil {
		return err
	}
	if _, err := c.cfg.Kube.CoreV1().Nodes().Patch(ctx, c.cfg.NodeName, apitypes.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate Node %s with %s=%q: %w", c.cfg.NodeName, NodeGroupsAnnotation, groups, err)
	}
	klog.InfoS("Published the node's multicast groups", "node", c.cfg.NodeName, "groups", groups)
	return nil
}
