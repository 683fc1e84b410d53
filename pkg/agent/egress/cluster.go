package egress

import (
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"k8s.io/klog/v2"
)

// MemberlistPort is the port the agents' membership gossips on (TCP and
// UDP), upstream's default (clusterPort in antrea-agent.conf).
const MemberlistPort = 10351

// Cluster is the membership of the agents that can hold external IPs: each
// agent runs a memberlist member named after its node on the node's
// transport address, joins the other nodes, and learns within seconds
// when one stops answering (memberlist's SWIM failure detection: a probe a
// second, suspicion confirmed after a few rounds). Who holds an IP follows
// from the membership alone (Owner), so every agent computes the same
// answer without talking about it, as upstream's consistent hashing does.
type Cluster struct {
	name string
	ml   *memberlist.Memberlist

	mu        sync.Mutex
	alive     map[string]bool
	listeners []func()

	joined     chan struct{}
	joinedOnce sync.Once
}

// ClusterConfig configures a member.
type ClusterConfig struct {
	// NodeName names the member.
	NodeName string
	// BindIP is the node's transport address; Port the gossip port
	// (MemberlistPort when 0).
	BindIP net.IP
	Port   int
	// OnChange, when set, is the first listener (see AddListener).
	OnChange func()
	// Fast shortens the probe intervals (tests on one machine).
	Fast bool
}

// NewCluster starts this node's member; Join makes it meet the others.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{name: cfg.NodeName, alive: map[string]bool{}, joined: make(chan struct{})}
	if cfg.OnChange != nil {
		c.listeners = append(c.listeners, cfg.OnChange)
	}
	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.GossipInterval = 50 * time.Millisecond
		mc.SuspicionMult = 2
	}
	mc.Name = cfg.NodeName
	port := cfg.Port
	if port == 0 {
		port = MemberlistPort
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = cfg.BindIP.String(), port, port
	mc.Events = &events{c: c}
	mc.Logger = log.New(io.Discard, "", 0)
	if klog.V(4).Enabled() {
		mc.Logger = log.New(klogWriter{}, "", 0)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("memberlist on %s: %w", net.JoinHostPort(mc.BindAddr, strconv.Itoa(port)), err)
	}
	c.ml = ml
	return c, nil
}

// AddListener adds f to the functions called when a member joins, leaves
// or fails: each on a goroutine of its own, never with the Cluster's lock
// held. (Egress and the LoadBalancer IPs share one membership.)
func (c *Cluster) AddListener(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, f)
}

// MarkJoined says the first join is done (it reached a member, which told
// this one the whole membership, or no other member answered): until then
// a member knows only itself, and deciding who holds an IP would take every
// IP for itself. It calls the listeners.
func (c *Cluster) MarkJoined() {
	c.joinedOnce.Do(func() {
		close(c.joined)
		c.mu.Lock()
		listeners := slices.Clone(c.listeners)
		c.mu.Unlock()
		for _, f := range listeners {
			go f()
		}
	})
}

// Joined says whether MarkJoined was called.
func (c *Cluster) Joined() bool {
	select {
	case <-c.joined:
		return true
	default:
		return false
	}
}

// JoinAny tries the addresses one at a time, in the given order, until a
// member answers (memberlist's push-pull then gives this member the whole
// membership): one unreachable node costs one timeout, not the join.
func (c *Cluster) JoinAny(addrs []string) bool {
	for _, a := range addrs {
		if n, err := c.ml.Join([]string{a}); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// Join contacts the given nodes' members (host:port or host); members
// already known are skipped. It returns how many answered.
func (c *Cluster) Join(addrs []string) (int, error) {
	return c.ml.Join(addrs)
}

// Leave announces this member's departure and stops it.
func (c *Cluster) Leave(timeout time.Duration) {
	if err := c.ml.Leave(timeout); err != nil {
		klog.ErrorS(err, "Memberlist leave failed")
	}
	if err := c.ml.Shutdown(); err != nil {
		klog.ErrorS(err, "Memberlist shutdown failed")
	}
}

// Alive lists the members alive now (this one included), sorted.
func (c *Cluster) Alive() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.alive))
	for n := range c.alive {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// IsAlive says whether the named member is alive.
func (c *Cluster) IsAlive(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.alive[name]
}

func (c *Cluster) set(name string, alive bool) {
	c.mu.Lock()
	changed := c.alive[name] != alive
	if alive {
		c.alive[name] = true
	} else {
		delete(c.alive, name)
	}
	listeners := slices.Clone(c.listeners)
	c.mu.Unlock()
	if changed {
		klog.InfoS("Memberlist member changed", "node", name, "alive", alive)
		for _, f := range listeners {
			go f()
		}
	}
}

// events is memberlist's event delegate.
type events struct{ c *Cluster }

func (e *events) NotifyJoin(n *memberlist.Node)   { e.c.set(n.Name, true) }
func (e *events) NotifyLeave(n *memberlist.Node)  { e.c.set(n.Name, false) }
func (e *events) NotifyUpdate(n *memberlist.Node) {}

// klogWriter sends memberlist's log lines to klog at V(4).
type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	klog.V(4).InfoS("Memberlist", "log", string(p))
	return len(p), nil
}

// Owner is the node that holds key (an external IP) among candidates:
// rendezvous hashing, the candidate with the highest hash of (node, key).
// Every agent that sees the same candidates picks the same node; when a
// node goes, only its keys move, and when it comes back exactly those move
// back to it, with no other key moving (no flapping of the others). ""
// when there is no candidate.
func Owner(key string, candidates []string) string {
	var best string
	var bestScore uint64
	for _, n := range candidates {
		h := fnv.New64a()
		_, _ = h.Write([]byte(n))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(key))
		s := mix64(h.Sum64())
		if best == "" || s > bestScore || (s == bestScore && n < best) {
			best, bestScore = n, s
		}
	}
	return best
}

// mix64 spreads FNV's output (its high bits vary little for keys that
// differ in their last bytes) over all 64 bits (the finalizer of
// MurmurHash3), so the owners of a range of IPs are balanced.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb3fe1a85ec53
	x ^= x >> 33
	return x
}
