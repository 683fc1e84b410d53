package egress

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
)

// Datapath is what the controller writes: the OpenFlow client's Egress
// flows and the node netfilter's Egress SNAT (each the whole state).
type Datapath interface {
	SetEgressFlows(ctx context.Context, want agentof.EgressFlows) error
}

// SNAT is the node netfilter's Egress part.
type SNAT interface {
	SetEgressSNAT(ctx context.Context, want nodenet.EgressSNAT) error
}

// Config is what the controller needs.
type Config struct {
	NodeName string
	// PodCIDRs are this node's: a member whose IP is in one is a local pod.
	PodCIDRs []netip.Prefix
	// Gateway is the gateway interface's name; Routed says pod traffic to
	// other nodes is routed by the underlay (noEncap).
	Gateway string
	Routed  bool

	// Client updates Egress statuses (crd.antrea.io, kube-apiserver).
	Client versioned.Interface
	// Controlplane watches EgressGroups (antrea-controller, dialed
	// directly: package controllerclient); Client when nil.
	Controlplane versioned.Interface
	Egresses     crdlisters.EgressLister
	Pools        crdlisters.ExternalIPPoolLister
	Nodes        corelisters.NodeLister
	// Informers whose events make the controller sync (their handlers are
	// added by NewController).
	Informers []cache.SharedIndexInformer

	Flows Datapath
	SNAT  SNAT
	IPs   *IPAssigner
	// Routes writes the routing of the subnets of pools with subnetInfo
	// (SubnetRouter; nil: none).
	Routes interface{ Sync([]SubnetRoute) error }
	// IsLocal says whether ip is an address of this node that the
	// operator configured (an egressIP without a pool).
	IsLocal func(ip netip.Addr) bool
	// Cluster is the membership; add MembershipChanged as its listener.
	Cluster *Cluster
	// Resync is how often the whole state is written again even without an
	// event (an address ovs-vswitchd's restart took away comes back).
	Resync time.Duration
	// TrafficShaping realizes spec.bandwidth (the EgressTrafficShaping
	// gate); without it a bandwidth is ignored, as upstream.
	TrafficShaping bool
}

// Controller realizes the Egresses on this node: it decides from the
// membership which node holds each Egress IP (Owner over the alive members
// the IP's pool allows), holds the IPs this node owns (IPAssigner), SNATs
// the traffic of every member pod of those Egresses (nodenet), sends its
// own member pods' traffic to the owner of their Egress otherwise
// (OpenFlow), and, as the owner, reports the Egress's status.
type Controller struct {
	// Syncer: Trigger, MembershipChanged (a listener of the Cluster).
	*Syncer
	cfg Config

	mu     sync.Mutex
	groups map[string][]cpv1beta2.GroupMember // EgressGroup name (the Egress's) -> members
	listed bool

	// last is what the last sync wrote, for the status and the logs.
	lastOwners map[string]string
	// written is what the last sync wrote of the flows and the SNAT map
	// (nil: unknown, write both).
	written *written

	// held is what IPs.Sync last left this node holding; heldListeners
	// are told when it changes (BGP advertises it).
	held          []netip.Addr
	heldListeners []func()
}

type written struct {
	flows agentof.EgressFlows
	snat  map[netip.Addr]netip.Addr
	marks map[netip.Addr]uint32
}

// NewController makes the controller and adds its event handlers.
func NewController(cfg Config) *Controller {
	if cfg.Resync == 0 {
		cfg.Resync = 10 * time.Second
	}
	return &Controller{cfg: cfg, Syncer: NewSyncer(cfg.Informers), groups: map[string][]cpv1beta2.GroupMember{}}
}

// Run watches the EgressGroups and syncs until ctx ends; then this node's
// external IPs are released (its member leaves, and the others take them).
func (c *Controller) Run(ctx context.Context) {
	go c.watchGroups(ctx)
	c.Syncer.Run(ctx, "Egress", c.cfg.Resync, c.sync)
}

// watchGroups lists and watches every EgressGroup (all members: the node
// that holds an Egress IP SNATs the traffic of the Egress's pods on every
// node), applying full objects and patches, until ctx ends.
func (c *Controller) watchGroups(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.listAndWatchGroups(ctx)
		if ctx.Err() != nil {
			return
		}
		klog.InfoS("EgressGroup watch ended; listing again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (c *Controller) listAndWatchGroups(ctx context.Context) error {
	client := c.cfg.Controlplane
	if client == nil {
		client = c.cfg.Client
	}
	cp := client.ControlplaneV1beta2().EgressGroups()
	l, err := cp.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list EgressGroups: %w", err)
	}
	groups := map[string][]cpv1beta2.GroupMember{}
	for _, g := range l.Items {
		groups[g.Name] = g.GroupMembers
	}
	c.mu.Lock()
	c.groups, c.listed = groups, true
	c.mu.Unlock()
	c.Trigger()
	w, err := cp.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return fmt.Errorf("watch EgressGroups: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if err := c.applyGroupEvent(ev); err != nil {
				return err
			}
			c.Trigger()
		}
	}
}

// applyGroupEvent applies one watch event to the members.
func (c *Controller) applyGroupEvent(ev watch.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Type {
	case watch.Bookmark:
		return nil
	case watch.Error:
		return fmt.Errorf("watch EgressGroups: %v", apierrors.FromObject(ev.Object))
	}
	switch o := ev.Object.(type) {
	case *cpv1beta2.EgressGroupPatch:
		members := slices.DeleteFunc(slices.Clone(c.groups[o.Name]), func(m cpv1beta2.GroupMember) bool {
			return slices.ContainsFunc(o.RemovedGroupMembers, func(r cpv1beta2.GroupMember) bool { return sameMember(m, r) })
		})
		c.groups[o.Name] = append(members, o.AddedGroupMembers...)
	case *cpv1beta2.EgressGroup:
		if ev.Type == watch.Deleted {
			delete(c.groups, o.Name)
		} else {
			c.groups[o.Name] = o.GroupMembers
		}
	default:
		return fmt.Errorf("unexpected object %T in the EgressGroup watch", ev.Object)
	}
	return nil
}

func sameMember(a, b cpv1beta2.GroupMember) bool {
	if a.Pod != nil && b.Pod != nil {
		return a.Pod.Namespace == b.Pod.Namespace && a.Pod.Name == b.Pod.Name
	}
	return slices.EqualFunc(a.IPs, b.IPs, func(x, y cpv1beta2.IPAddress) bool { return net.IP(x).Equal(net.IP(y)) })
}

// State is what the controller computed: which node holds each Egress IP
// and what this node writes. Computing it touches nothing (sync writes it).
type State struct {
	// Owners maps each Egress to the node holding its IP ("" none).
	Owners map[string]string
	IPs    map[string]netip.Addr
	// Hold are the IPs this node holds.
	Hold []netip.Addr
	SNAT map[netip.Addr]netip.Addr
	// Remote maps a local member pod's IP to its Egress's owner's IP.
	Remote map[netip.Addr]net.IP
	// Shaped are the rate limits of the Egresses this node holds that have
	// a bandwidth (with TrafficShaping), by Egress name.
	Shaped map[string]agentof.EgressShaping
	// Subnets are the subnets of the held IPs whose pool has subnetInfo.
	Subnets map[netip.Addr]Subnet
}

// routes are the subnets' routing (subnet.go) and the mark of every pod in
// SNAT whose Egress IP is in one of them.
func (st *State) routes(link string) ([]SubnetRoute, map[netip.Addr]uint32) {
	var subnets []Subnet
	for _, s := range st.Subnets {
		subnets = append(subnets, s)
	}
	routes := subnetRoutes(subnets, link)
	marks := map[netip.Addr]uint32{}
	for pod, eip := range st.SNAT {
		s, ok := st.Subnets[eip]
		if !ok {
			continue
		}
		if i := slices.IndexFunc(routes, func(r SubnetRoute) bool { return r.Subnet == s }); i >= 0 {
			marks[pod] = routes[i].Mark
		}
	}
	return routes, marks
}

// compute decides the state from the listers, the members and the alive
// members of the cluster.
func (c *Controller) compute(alive []string) (*State, error) {
	egresses, err := c.cfg.Egresses.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	// Of the Egresses that select a pod and have a holder, the oldest wins
	// it (then by name).
	sort.Slice(egresses, func(i, j int) bool {
		a, b := egresses[i], egresses[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	nodeIPs := map[string]net.IP{}
	nodes, err := c.cfg.Nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	nodeByName := map[string]*corev1.Node{}
	for _, n := range nodes {
		nodeByName[n.Name] = n
		if ip := nodeInternalIP(n); ip != nil {
			nodeIPs[n.Name] = ip
		}
	}
	st := &State{Owners: map[string]string{}, IPs: map[string]netip.Addr{}, SNAT: map[netip.Addr]netip.Addr{}, Remote: map[netip.Addr]net.IP{},
		Shaped: map[string]agentof.EgressShaping{}, Subnets: map[netip.Addr]Subnet{}}
	taken := map[netip.Addr]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range egresses {
		// The Egress's IPs (egressIP, or egressIPs: one per family); the
		// first decides the holder, who holds them all, and a member pod
		// leaves with the one of its family.
		var ips []netip.Addr
		var pools []string
		for _, sl := range e.IPSlots() {
			if sl.IP.IsValid() {
				ips, pools = append(ips, sl.IP), append(pools, sl.Pool)
			}
		}
		if len(ips) == 0 {
			continue // no IP yet: the controller allocates it
		}
		ip := ips[0]
		var owner string
		if pools[0] == "" {
			// An egressIP without a pool is placed by the operator, as
			// upstream: the node that has it as an address of its own
			// holds it, and the others learn which from the status.
			switch {
			case c.cfg.IsLocal != nil && c.cfg.IsLocal(ip):
				owner = c.cfg.NodeName
			case e.Status.EgressNode != c.cfg.NodeName && slices.Contains(alive, e.Status.EgressNode):
				owner = e.Status.EgressNode
			}
		} else {
			owner = Owner(ip.String(), c.candidates(pools[0], alive, nodeByName))
			for i, a := range ips {
				if owner == c.cfg.NodeName && pools[i] != "" && !slices.Contains(st.Hold, a) {
					st.Hold = append(st.Hold, a)
					if s, ok := c.subnet(pools[i]); ok && s.Prefix.Contains(a) {
						st.Subnets[a] = s
					}
				}
			}
		}
		st.Owners[e.Name], st.IPs[e.Name] = owner, ip
		if owner == "" {
			continue
		}
		var shaping *agentof.EgressShaping
		if owner == c.cfg.NodeName && c.cfg.TrafficShaping && e.Spec.Bandwidth != nil {
			if rate, burst, err := e.Spec.Bandwidth.Kbits(); err != nil {
				klog.ErrorS(err, "Egress bandwidth not realized", "egress", e.Name)
			} else {
				shaping = &agentof.EgressShaping{RateKbps: rate, BurstKb: burst}
			}
		}
		for _, m := range c.groups[e.Name] {
			for _, raw := range m.IPs {
				pip, ok := netip.AddrFromSlice(net.IP(raw))
				if !ok {
					continue
				}
				pip = pip.Unmap()
				i := slices.IndexFunc(ips, func(a netip.Addr) bool { return a.Is4() == pip.Is4() })
				if i < 0 || taken[pip] {
					continue
				}
				taken[pip] = true
				if owner == c.cfg.NodeName {
					st.SNAT[pip] = ips[i]
					if shaping != nil && c.local(pip) {
						shaping.Local = append(shaping.Local, pip)
					} else if shaping != nil {
						shaping.Remote = append(shaping.Remote, pip)
					}
				} else if c.local(pip) && nodeIPs[owner] != nil {
					st.Remote[pip] = nodeIPs[owner]
				}
			}
		}
		if shaping != nil {
			slices.SortFunc(shaping.Local, func(a, b netip.Addr) int { return a.Compare(b) })
			slices.SortFunc(shaping.Remote, func(a, b netip.Addr) int { return a.Compare(b) })
			st.Shaped[e.Name] = *shaping
		}
	}
	slices.SortFunc(st.Hold, func(a, b netip.Addr) int { return a.Compare(b) })
	return st, nil
}

// subnet is the subnet of pool poolName's subnetInfo (ok false: none).
func (c *Controller) subnet(poolName string) (Subnet, bool) {
	pool, err := c.cfg.Pools.Get(poolName)
	if err != nil {
		return Subnet{}, false
	}
	return SubnetOf(pool.Spec.SubnetInfo)
}

// candidates are the alive members that the pool poolName allows (every
// alive member while the pool is not known yet).
func (c *Controller) candidates(poolName string, alive []string, nodes map[string]*corev1.Node) []string {
	pool, err := c.cfg.Pools.Get(poolName)
	if err != nil {
		return alive
	}
	sel, err := metav1.LabelSelectorAsSelector(&pool.Spec.NodeSelector)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range alive {
		if node := nodes[n]; node != nil && sel.Matches(labels.Set(node.Labels)) {
			out = append(out, n)
		}
	}
	return out
}

func (c *Controller) local(ip netip.Addr) bool {
	for _, p := range c.cfg.PodCIDRs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func nodeInternalIP(n *corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip := net.ParseIP(a.Address); ip != nil {
				return ip
			}
		}
	}
	return nil
}

// sync computes and writes the whole state. Before the EgressGroups were
// listed once it writes nothing (it would drop the SNAT of every member),
// nor before the membership's first join (it would hold every IP).
func (c *Controller) sync(ctx context.Context) error {
	c.mu.Lock()
	listed := c.listed
	c.mu.Unlock()
	if !listed || !c.cfg.Cluster.Joined() {
		return nil
	}
	st, err := c.compute(c.cfg.Cluster.Alive())
	if err != nil {
		return err
	}
	// Order: the IPs this node takes first (replies need them), then the
	// flows (a local pod whose Egress moved away is tunnelled to its new
	// holder before this node stops SNATing it), then the SNAT, then the
	// IPs this node gave up: no packet leaves masqueraded to the node's
	// address in between.
	c.cfg.IPs.SetSubnets(st.Subnets)
	added, err := c.cfg.IPs.Add(st.Hold)
	if err != nil {
		return err
	}
	routes, marks := st.routes(c.cfg.IPs.Link())
	if c.cfg.Routes != nil {
		if err := c.cfg.Routes.Sync(routes); err != nil {
			return err
		}
	}
	if c.TakeReannounce() {
		// Those just added were announced by Add.
		c.cfg.IPs.Announce(slices.DeleteFunc(slices.Clone(st.Hold), func(ip netip.Addr) bool { return slices.Contains(added, ip) }))
	}
	// The flows and the SNAT map are written only when they change: most
	// events (a Node's status, an unrelated pod) change neither, and each
	// write is an OpenFlow bundle and an nft transaction. (The switch's
	// flows come back by replay after ovs-vswitchd restarts.)
	flows := agentof.EgressFlows{Remote: st.Remote, Holding: len(st.Hold) > 0, Shaped: st.Shaped}
	if c.written == nil || !c.written.flows.Equal(flows) {
		if err := c.cfg.Flows.SetEgressFlows(ctx, flows); err != nil {
			c.written = nil
			return err
		}
	}
	if c.written == nil || !maps.Equal(c.written.snat, st.SNAT) || !maps.Equal(c.written.marks, marks) {
		if err := c.cfg.SNAT.SetEgressSNAT(ctx, nodenet.EgressSNAT{Gateway: c.cfg.Gateway, Routed: c.cfg.Routed, SNAT: st.SNAT,
			Marks: marks}); err != nil {
			c.written = nil
			return err
		}
	}
	c.written = &written{flows: flows, snat: st.SNAT, marks: marks}
	if _, err := c.cfg.IPs.Sync(st.Hold); err != nil {
		return err
	}
	c.setHeld(st.Hold)
	if !maps.Equal(c.lastOwners, st.Owners) {
		klog.InfoS("Egress IPs placed", "owners", st.Owners, "holding", st.Hold)
		c.lastOwners = st.Owners
	}
	return c.reportStatus(ctx, st)
}

// HeldIPs are the Egress IPs this node holds (as of the last sync).
func (c *Controller) HeldIPs() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.held)
}

// AddHeldListener calls f (without locks held) whenever the set of Egress
// IPs this node holds changed. Add listeners before Run.
func (c *Controller) AddHeldListener(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heldListeners = append(c.heldListeners, f)
}

func (c *Controller) setHeld(hold []netip.Addr) {
	hold = slices.Clone(hold)
	slices.SortFunc(hold, func(a, b netip.Addr) int { return a.Compare(b) })
	c.mu.Lock()
	changed := !slices.Equal(c.held, hold)
	c.held = hold
	ls := slices.Clone(c.heldListeners)
	c.mu.Unlock()
	if changed {
		for _, f := range ls {
			f()
		}
	}
}

// reportStatus writes the status of the Egresses this node holds (the
// owner reports, as upstream: egressNode, egressIP, IPAssigned).
func (c *Controller) reportStatus(ctx context.Context, st *State) error {
	for name, owner := range st.Owners {
		if owner != c.cfg.NodeName {
			continue
		}
		e, err := c.cfg.Egresses.Get(name)
		if err != nil {
			continue
		}
		ip := st.IPs[name].String()
		if e.Status.EgressNode == owner && e.Status.EgressIP == ip && hasCondition(e, crdv1beta1.IPAssigned) {
			continue
		}
		e = e.DeepCopy()
		e.Status.EgressNode, e.Status.EgressIP = owner, ip
		setCondition(e, crdv1beta1.EgressCondition{Type: crdv1beta1.IPAssigned, Status: corev1.ConditionTrue,
			Reason: "Assigned", Message: fmt.Sprintf("EgressIP %s is assigned to Node %s", ip, owner)})
		if _, err := c.cfg.Client.CrdV1beta1().Egresses().UpdateStatus(ctx, e, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("status of Egress %s: %w", name, err)
		}
		klog.InfoS("Egress IP held by this node", "egress", name, "ip", ip)
	}
	return nil
}

func hasCondition(e *crdv1beta1.Egress, t crdv1beta1.EgressConditionType) bool {
	for _, cond := range e.Status.Conditions {
		if cond.Type == t && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func setCondition(e *crdv1beta1.Egress, cond crdv1beta1.EgressCondition) {
	cond.LastTransitionTime = metav1.Now()
	for i := range e.Status.Conditions {
		if e.Status.Conditions[i].Type == cond.Type {
			if e.Status.Conditions[i].Status == cond.Status {
				cond.LastTransitionTime = e.Status.Conditions[i].LastTransitionTime
			}
			e.Status.Conditions[i] = cond
			return
		}
	}
	e.Status.Conditions = append(e.Status.Conditions, cond)
}
