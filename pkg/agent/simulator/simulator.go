// Package simulator runs many simulated antrea-agents in one process for
// scale measurements (docs/scale.md). Each simulated agent is one Node's
// policy watchers exactly as the real agent runs them
// (networkpolicy.Span: the agent's own list/watch code with
// nodeName=<node>, its own rule cache), on its own client and its own TCP
// connection to antrea-controller (dialed directly, as the real agent:
// package controllerclient), with the identity it is given (the
// antrea-agent ServiceAccount, as the real agent). There is no datapath:
// nothing is realized, nothing is reported back.
//
// For every list and event an agent receives it records when, which object,
// and how many bytes the object is in JSON (the controlplane API's wire
// encoding); the bytes its connection actually read (TLS included) are
// counted apart. State gives the whole state each agent ends up with.
package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/controllerclient"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// Record is one object an agent received.
type Record struct {
	At time.Time
	// Kind is networkpolicies, addressgroups or appliedtogroups.
	Kind string
	// Type is LISTED for an object of a list, else the watch event type.
	Type string
	// Name is the object's name; for a policy, Source is its source
	// (type/namespace/name) and Generation its generation.
	Name       string
	Source     string
	Generation int64
	// Bytes is the object's JSON size.
	Bytes int
	// Added are the pod members (namespace/name) a group patch adds, or
	// those of a group the node receives by an ADDED event.
	Added []string
}

// Agent is one simulated agent.
type Agent struct {
	Node string
	span *npcontroller.Span
	// wire counts the bytes read from the agent's connection(s).
	wire atomic.Int64

	mu      sync.Mutex
	records []Record
}

// Simulator holds the agents.
type Simulator struct {
	src    *controllerclient.Source
	agents []*Agent
}

// New makes one agent per node, each with its own client built from cfg
// (which carries the agents' identity) and its own connections. The
// clients dial antrea-controller directly, as the real agent's
// (package controllerclient): one Source, read with cfg's identity, tells
// them all where the controller is and which CA verifies it.
func New(cfg *rest.Config, nodes []string) (*Simulator, error) {
	return newSimulator(cfg, nodes, true)
}

// NewThroughKubeAPIServer is New with agents that reach the controller
// through kube-apiserver's aggregation layer (the path agents took before
// they dialed the controller): for a host from which the controller's
// endpoint is not reachable (a lab's Nodes are netns whose addresses the
// host must not dial), and to compare both paths.
func NewThroughKubeAPIServer(cfg *rest.Config, nodes []string) (*Simulator, error) {
	return newSimulator(cfg, nodes, false)
}

func newSimulator(cfg *rest.Config, nodes []string, direct bool) (*Simulator, error) {
	s := &Simulator{}
	if direct {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		s.src = controllerclient.NewSource(kube)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == "" || seen[n] {
			return nil, fmt.Errorf("nodes: %q is empty or given twice", n)
		}
		seen[n] = true
		a := &Agent{Node: n}
		c := rest.CopyConfig(cfg)
		c.UserAgent = "antrea-agent-simulator/" + n
		c.QPS, c.Burst = -1, 0 // the agent's three lists are not throttled
		// A transport of its own: each agent has its own connection, as
		// real agents on separate nodes do.
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, n: &a.wire}, nil
		}
		cc := c
		if direct {
			var err error
			if cc, err = s.src.Config(c, dial); err != nil {
				return nil, fmt.Errorf("client of node %s: %w", n, err)
			}
		} else {
			// A dialer of its own: client-go then gives the agent its own
			// transport, not the shared cached one.
			cc.Dial = dial
		}
		client, err := versioned.NewForConfig(cc)
		if err != nil {
			return nil, fmt.Errorf("client of node %s: %w", n, err)
		}
		a.span = npcontroller.NewSpan(n, client, a.observe)
		s.agents = append(s.agents, a)
	}
	return s, nil
}

// Run runs every agent, and the Source of their controller address, until
// ctx ends.
func (s *Simulator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.src != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.src.Run(ctx) }()
	}
	for _, a := range s.agents {
		wg.Add(1)
		go func() { defer wg.Done(); a.span.Run(ctx) }()
	}
	klog.InfoS("Simulated agents running", "agents", len(s.agents))
	wg.Wait()
}

// WaitSynced waits until every agent has listed each resource once and
// has its three watches open.
func (s *Simulator) WaitSynced(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		waiting := ""
		for _, a := range s.agents {
			if !a.Synced() {
				waiting = a.Node
				break
			}
		}
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent of node %s not synced: %w", waiting, ctx.Err())
		case <-t.C:
		}
	}
}

// Agents lists the agents in the order of their nodes.
func (s *Simulator) Agents() []*Agent { return s.agents }

// State is the whole state the agent holds now.
func (a *Agent) State() npcontroller.SpanState { return a.span.State() }

// Synced reports whether the agent has listed every resource once and has
// its three watches open now.
func (a *Agent) Synced() bool { return a.span.HasSynced() && a.span.Connected() == nil }

// WireBytes are the bytes read from the agent's connections so far.
func (a *Agent) WireBytes() int64 { return a.wire.Load() }

// Records returns a copy of what the agent received so far.
func (a *Agent) Records() []Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Record(nil), a.records...)
}

func (a *Agent) observe(o npcontroller.Observation) {
	now := time.Now()
	var recs []Record
	if o.Event.Object == nil {
		for _, obj := range o.Listed {
			recs = append(recs, record(now, o.Kind, "LISTED", obj))
		}
	} else {
		recs = append(recs, record(now, o.Kind, string(o.Event.Type), o.Event.Object))
	}
	a.mu.Lock()
	a.records = append(a.records, recs...)
	a.mu.Unlock()
}

func record(at time.Time, kind, typ string, obj runtime.Object) Record {
	r := Record{At: at, Kind: kind, Type: typ}
	if b, err := json.Marshal(obj); err == nil {
		r.Bytes = len(b)
	}
	switch o := obj.(type) {
	case *cpv1beta2.NetworkPolicy:
		r.Name, r.Generation = o.Name, o.Generation
		if o.SourceRef != nil {
			r.Source = string(o.SourceRef.Type) + "/" + o.SourceRef.Namespace + "/" + o.SourceRef.Name
		}
	case *cpv1beta2.AddressGroupPatch:
		r.Name, r.Added = o.Name, podKeys(o.AddedGroupMembers)
	case *cpv1beta2.AppliedToGroupPatch:
		r.Name, r.Added = o.Name, podKeys(o.AddedGroupMembers)
	case *cpv1beta2.AddressGroup:
		r.Name = o.Name
		if typ == Added {
			r.Added = podKeys(o.GroupMembers)
		}
	case *cpv1beta2.AppliedToGroup:
		r.Name = o.Name
		if typ == Added {
			r.Added = podKeys(o.GroupMembers)
		}
	}
	return r
}

func podKeys(ms []cpv1beta2.GroupMember) []string {
	var out []string
	for _, m := range ms {
		if m.Pod != nil {
			out = append(out, m.Pod.Namespace+"/"+m.Pod.Name)
		}
	}
	return out
}

// Type of an event type, for callers filtering records.
const (
	Listed   = "LISTED"
	Added    = string(watch.Added)
	Modified = string(watch.Modified)
	Deleted  = string(watch.Deleted)
)

// countingConn counts the bytes read.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Since returns the records received at or after t (records are kept in
// the order they arrived).
func (a *Agent) Since(t time.Time) []Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := len(a.records)
	for i > 0 && !a.records[i-1].At.Before(t) {
		i--
	}
	return append([]Record(nil), a.records[i:]...)
}
