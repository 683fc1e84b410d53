package bgp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/egress"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
)

// RouterIDAnnotation on a Node gives its BGP router ID (an IPv4 address),
// as upstream; without it the Node's IPv4 address is the router ID.
const RouterIDAnnotation = "node.antrea.io/bgp-router-id"

// Speaker is a BGP speaker the Controller drives (GoBGP).
type Speaker interface {
	Start(ctx context.Context, g Global) error
	Stop(ctx context.Context) error
	AddPeer(ctx context.Context, p Peer) error
	DeletePeer(ctx context.Context, addr netip.Addr) error
	Advertise(ctx context.Context, prefix netip.Prefix) error
	Withdraw(ctx context.Context, prefix netip.Prefix) error
	Peers(ctx context.Context) ([]PeerStatus, error)
}

// EgressIPs are the Egress IPs this Node holds (egress.Controller).
type EgressIPs interface {
	HeldIPs() []netip.Addr
}

// Config is what the Controller reads and drives.
type Config struct {
	NodeName string
	// NodeIP is where the speaker listens, the sessions' source and,
	// when IPv4, the default router ID.
	NodeIP   netip.Addr
	PodCIDRs []netip.Prefix

	Policies crdlisters.BGPPolicyLister
	Nodes    corelisters.NodeLister
	Services corelisters.ServiceLister
	Slices   discoverylisters.EndpointSliceLister
	// Secrets lists the agent's Namespace's Secrets (only
	// antrea-bgp-passwords is read).
	Secrets corelisters.SecretNamespaceLister
	// Informers are those of the listers: each event asks for a sync.
	Informers []cache.SharedIndexInformer
	// Egress is nil without the Egress feature.
	Egress   EgressIPs
	Recorder record.EventRecorder
	Speaker  Speaker
	// Resync is the period of a sync without events (default 30 s).
	Resync time.Duration
}

// Controller keeps the speaker as the BGPPolicy in effect on the Node says.
type Controller struct {
	*egress.Syncer
	cfg Config

	mu sync.Mutex
	// running is the speaker's configuration while it runs, policy the
	// name of the policy in effect.
	running *Global
	policy  string
	peers   map[netip.Addr]Peer
	routes  map[netip.Prefix]RouteSource
	// reported are the ignored policies already reported, with the
	// policy in effect they were reported against.
	reported map[string]string
}

// NewController makes the controller and adds its event handlers.
func NewController(cfg Config) *Controller {
	if cfg.Resync == 0 {
		cfg.Resync = 30 * time.Second
	}
	return &Controller{cfg: cfg, Syncer: egress.NewSyncer(cfg.Informers), reported: map[string]string{}}
}

// Run syncs until ctx ends, then stops the speaker (its peers see the
// session close and keep the routes for their graceful-restart time).
func (c *Controller) Run(ctx context.Context) {
	synced := make([]cache.InformerSynced, 0, len(c.cfg.Informers))
	for _, inf := range c.cfg.Informers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	c.Trigger()
	c.Syncer.Run(ctx, "BGPPolicy", c.cfg.Resync, c.sync)
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.stop(stopCtx)
}

func (c *Controller) stop(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		return
	}
	if err := c.cfg.Speaker.Stop(ctx); err != nil {
		klog.ErrorS(err, "Stopping the BGP speaker")
	}
	klog.InfoS("BGP speaker stopped", "policy", c.policy)
	c.running, c.policy, c.peers, c.routes = nil, "", nil, nil
}

// sync makes the speaker what the policy in effect says: stopped when
// there is none; else its global configuration, its peers and its routes.
func (c *Controller) sync(ctx context.Context) error {
	node, err := c.cfg.Nodes.Get(c.cfg.NodeName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	policies, err := c.cfg.Policies.List(labels.Everything())
	if err != nil {
		return err
	}
	eff, ignored := Effective(policies, node)
	if eff == nil {
		c.stop(ctx)
		return nil
	}
	c.reportIgnored(eff, ignored)
	global := c.global(eff, node)
	peers, err := c.desiredPeers(eff)
	if err != nil {
		return err
	}
	routes, err := c.desiredRoutes(eff)
	if err != nil {
		return err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil && !c.running.equal(global) {
		klog.InfoS("BGP speaker's configuration changed; restarting it", "policy", eff.Name, "asn", global.ASN, "port", global.ListenPort, "routerID", global.RouterID)
		if err := c.cfg.Speaker.Stop(ctx); err != nil {
			return err
		}
		c.running, c.peers, c.routes = nil, nil, nil
	}
	if c.running == nil {
		if err := c.cfg.Speaker.Start(ctx, global); err != nil {
			return err
		}
		klog.InfoS("BGP speaker started", "policy", eff.Name, "asn", global.ASN, "listen", netip.AddrPortFrom(c.cfg.NodeIP, uint16(global.ListenPort)), "routerID", global.RouterID)
		c.running, c.peers, c.routes = &global, map[netip.Addr]Peer{}, map[netip.Prefix]RouteSource{}
	}
	c.policy = eff.Name
	if err := c.syncPeersLocked(ctx, peers); err != nil {
		return err
	}
	return c.syncRoutesLocked(ctx, routes)
}

// syncPeersLocked removes, replaces and adds the peers that differ.
func (c *Controller) syncPeersLocked(ctx context.Context, want map[netip.Addr]Peer) error {
	for addr, p := range c.peers {
		if w, ok := want[addr]; ok && w == p {
			continue
		}
		if err := c.cfg.Speaker.DeletePeer(ctx, addr); err != nil {
			return err
		}
		delete(c.peers, addr)
		klog.InfoS("BGP peer removed", "peer", addr)
	}
	for _, addr := range sortedKeys(want, netip.Addr.Compare) {
		if _, ok := c.peers[addr]; ok {
			continue
		}
		if err := c.cfg.Speaker.AddPeer(ctx, want[addr]); err != nil {
			return err
		}
		c.peers[addr] = want[addr]
		klog.InfoS("BGP peer added", "peer", addr, "asn", want[addr].ASN, "port", want[addr].Port)
	}
	return nil
}

// syncRoutesLocked withdraws what is no longer desired and advertises
// what is new.
func (c *Controller) syncRoutesLocked(ctx context.Context, want map[netip.Prefix]RouteSource) error {
	var withdrawn, advertised []netip.Prefix
	for _, p := range sortedKeys(c.routes, netip.Prefix.Compare) {
		if _, ok := want[p]; ok {
			continue
		}
		if err := c.cfg.Speaker.Withdraw(ctx, p); err != nil {
			return err
		}
		delete(c.routes, p)
		withdrawn = append(withdrawn, p)
	}
	for _, p := range sortedKeys(want, netip.Prefix.Compare) {
		if _, ok := c.routes[p]; !ok {
			if err := c.cfg.Speaker.Advertise(ctx, p); err != nil {
				return err
			}
			advertised = append(advertised, p)
		}
		c.routes[p] = want[p]
	}
	if len(withdrawn)+len(advertised) > 0 {
		klog.InfoS("BGP routes changed", "advertised", advertised, "withdrawn", withdrawn, "total", len(c.routes))
	}
	return nil
}

func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, cmp)
	return keys
}

// reportIgnored logs, and records an Event on, each policy that selects the
// Node but is not in effect, once per policy in effect.
func (c *Controller) reportIgnored(eff *crdv1alpha1.BGPPolicy, ignored []*crdv1alpha1.BGPPolicy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := map[string]string{}
	for _, p := range ignored {
		now[p.Name] = eff.Name
		if c.reported[p.Name] == eff.Name {
			continue
		}
		klog.InfoS("BGPPolicy selects this Node but is not in effect: an older one is", "policy", p.Name, "effective", eff.Name, "node", c.cfg.NodeName)
		if c.cfg.Recorder != nil {
			c.cfg.Recorder.Eventf(p, corev1.EventTypeWarning, "BGPPolicyNotEffective",
				"Node %s: BGPPolicy %s, the oldest that selects it, is in effect; this one is ignored there", c.cfg.NodeName, eff.Name)
		}
	}
	if len(ignored) > 0 {
		klog.V(2).InfoS("BGPPolicies ignored on this Node", "ignored", names(ignored), "effective", eff.Name)
	}
	c.reported = now
}

// global is the speaker's configuration under policy p.
func (c *Controller) global(p *crdv1alpha1.BGPPolicy, node *corev1.Node) Global {
	g := Global{ASN: uint32(p.Spec.LocalASN), RouterID: routerID(node, c.cfg.NodeName, c.cfg.NodeIP),
		ListenPort: crdv1alpha1.DefaultBGPListenPort}
	if c.cfg.NodeIP.IsValid() {
		g.ListenAddress = c.cfg.NodeIP.String()
	}
	if p.Spec.ListenPort != nil {
		g.ListenPort = *p.Spec.ListenPort
	}
	if cf := p.Spec.Confederation; cf != nil {
		g.Confederation = &Confederation{Identifier: uint32(cf.Identifier)}
		for _, m := range cf.MemberASNs {
			g.Confederation.Members = append(g.Confederation.Members, uint32(m))
		}
	}
	return g
}

// routerID is the Node's annotation when it is an IPv4 address, else its
// IPv4 address, else (IPv6-only) a hash of its name as an IPv4 address,
// as upstream chooses it.
func routerID(node *corev1.Node, name string, nodeIP netip.Addr) string {
	if node != nil {
		if a, err := netip.ParseAddr(node.Annotations[RouterIDAnnotation]); err == nil && a.Is4() {
			return a.String()
		}
	}
	if nodeIP.Is4() {
		return nodeIP.String()
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	s := h.Sum32()
	return netip.AddrFrom4([4]byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)}).String()
}

// desiredPeers are the policy's peers, each with its password from the
// Secret antrea-bgp-passwords (key ADDRESS-ASN) if there is one.
func (c *Controller) desiredPeers(p *crdv1alpha1.BGPPolicy) (map[netip.Addr]Peer, error) {
	var passwords map[string][]byte
	if c.cfg.Secrets != nil {
		s, err := c.cfg.Secrets.Get(crdv1alpha1.BGPPasswordsSecret)
		switch {
		case err == nil:
			passwords = s.Data
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	out := map[netip.Addr]Peer{}
	for i, bp := range p.Spec.BGPPeers {
		addr, err := netip.ParseAddr(bp.Address)
		if err != nil {
			// Admission refuses it; an object from before is skipped.
			klog.ErrorS(err, "BGPPolicy peer has a bad address; skipped", "policy", p.Name, "index", i)
			continue
		}
		addr = addr.Unmap()
		peer := Peer{Address: addr, ASN: uint32(bp.ASN), Port: crdv1alpha1.DefaultBGPListenPort,
			Password: string(passwords[fmt.Sprintf("%s-%d", bp.Address, bp.ASN)])}
		if bp.Port != nil {
			peer.Port = *bp.Port
		}
		if bp.MultihopTTL != nil {
			peer.MultihopTTL = *bp.MultihopTTL
		}
		if bp.GracefulRestartTimeSeconds != nil {
			peer.GracefulRestartTimeSeconds = *bp.GracefulRestartTimeSeconds
		}
		if bp.KeepaliveTimeSeconds != nil {
			peer.KeepaliveTimeSeconds = *bp.KeepaliveTimeSeconds
		}
		if bp.HoldTimeSeconds != nil {
			peer.HoldTimeSeconds = *bp.HoldTimeSeconds
		}
		if c.cfg.NodeIP.IsValid() && c.cfg.NodeIP.Is4() == addr.Is4() {
			peer.LocalAddress = c.cfg.NodeIP
		}
		out[addr] = peer
	}
	return out, nil
}

// desiredRoutes reads the listers into Desired's inputs.
func (c *Controller) desiredRoutes(p *crdv1alpha1.BGPPolicy) (map[netip.Prefix]RouteSource, error) {
	in := Inputs{NodeName: c.cfg.NodeName, Advertisements: p.Spec.Advertisements, PodCIDRs: c.cfg.PodCIDRs}
	if p.Spec.Advertisements.Service != nil {
		svcs, err := c.cfg.Services.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		sort.Slice(svcs, func(i, j int) bool {
			return svcs[i].Namespace+"/"+svcs[i].Name < svcs[j].Namespace+"/"+svcs[j].Name
		})
		in.Services = svcs
		eps, err := c.cfg.Slices.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		in.Slices = map[string][]*discoveryv1.EndpointSlice{}
		for _, s := range eps {
			if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
				in.Slices[s.Namespace+"/"+svc] = append(in.Slices[s.Namespace+"/"+svc], s)
			}
		}
	}
	if p.Spec.Advertisements.Egress != nil && c.cfg.Egress != nil {
		in.EgressIPs = c.cfg.Egress.HeldIPs()
	}
	return Desired(in), nil
}

// ErrNoPolicy is what the queries answer when no BGPPolicy is in effect on
// the Node.
var ErrNoPolicy = errors.New("there is no effective BGPPolicy applied to the Node")

// PolicyState is the policy in effect and the speaker's configuration.
func (c *Controller) PolicyState() (apis.BGPPolicyState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		return apis.BGPPolicyState{}, ErrNoPolicy
	}
	st := apis.BGPPolicyState{BGPPolicyName: c.policy, RouterID: c.running.RouterID, LocalASN: int32(c.running.ASN),
		ListenPort: c.running.ListenPort}
	if c.running.Confederation != nil {
		st.ConfederationIdentifier = int32(c.running.Confederation.Identifier)
	}
	return st, nil
}

// PeerStates are the speaker's peers and their sessions' states.
func (c *Controller) PeerStates(ctx context.Context) ([]apis.BGPPeerState, error) {
	c.mu.Lock()
	running := c.running != nil
	c.mu.Unlock()
	if !running {
		return nil, ErrNoPolicy
	}
	peers, err := c.cfg.Speaker.Peers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]apis.BGPPeerState, 0, len(peers))
	for _, p := range peers {
		out = append(out, apis.BGPPeerState{Peer: netip.AddrPortFrom(p.Address, uint16(p.Port)).String(), ASN: int32(p.ASN),
			State: p.State, GracefulRestartTimeSeconds: p.GracefulRestartTimeSeconds, MultihopTTL: p.MultihopTTL,
			UptimeSeconds: int64(p.Uptime.Seconds())})
	}
	slices.SortFunc(out, func(a, b apis.BGPPeerState) int { return compareStrings(a.Peer, b.Peer) })
	return out, nil
}

// RouteStates are the routes the speaker advertises.
func (c *Controller) RouteStates() ([]apis.BGPRouteState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		return nil, ErrNoPolicy
	}
	out := make([]apis.BGPRouteState, 0, len(c.routes))
	for _, p := range sortedKeys(c.routes, netip.Prefix.Compare) {
		out = append(out, apis.BGPRouteState{Route: p.String(), Type: string(c.routes[p].Type), K8sObjRef: c.routes[p].Object})
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// API paths of the queries on the agent API.
const (
	PolicyPath = "/bgppolicy"
	PeersPath  = "/bgppeers"
	RoutesPath = "/bgproutes"
)

// Handlers serve the queries on the agent API, by path: JSON bodies of
// pkg/agent/apiserver/apis; 404 when no policy is in effect.
func (c *Controller) Handlers() map[string]http.Handler {
	serve := func(get func(r *http.Request) (any, error)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, err := get(r)
			switch {
			case errors.Is(err, ErrNoPolicy):
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			case err != nil:
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	return map[string]http.Handler{
		PolicyPath: serve(func(*http.Request) (any, error) { return c.PolicyState() }),
		PeersPath:  serve(func(r *http.Request) (any, error) { return c.PeerStates(r.Context()) }),
		RoutesPath: serve(func(*http.Request) (any, error) { return c.RouteStates() }),
	}
}
