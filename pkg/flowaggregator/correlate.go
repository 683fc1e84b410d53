package flowaggregator

import (
	"net/netip"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

// Correlator joins the source node's and the destination node's records of
// one inter-node connection. A record naming both Pods (intra-node) needs
// no partner; nor does one whose remote address IsPodIP says is outside the
// cluster's Pod CIDRs (to or from external). Any other one-sided record
// waits for its partner (same 5-tuple and protocol, the other side) at most
// Wait, then is released alone. Not safe for concurrent use.
type Correlator struct {
	// Wait bounds how long a record waits for its partner.
	Wait time.Duration
	// IsPodIP says whether an address is a Pod's; nil: every one-sided
	// record may have a partner and waits.
	IsPodIP func(netip.Addr) bool
	// MaxPending bounds the waiting records; beyond, the oldest is
	// released alone (default 65536).
	MaxPending int

	pending map[key]*pendingFlow
	// Correlated counts joined pairs; Alone records released without the
	// partner they waited for.
	Correlated, Alone uint64
}

type pendingFlow struct {
	f     Flow
	since time.Time
}

// Add takes a record received at now and returns the records it completes
// (none while it waits).
func (c *Correlator) Add(f Flow, now time.Time) []Flow {
	if c.pending == nil {
		c.pending = map[key]*pendingFlow{}
	}
	fromSrc := f.FromSource != nil
	switch {
	case f.FlowType == ipfix.FlowTypeIntraNode || (f.SrcPod != "" && f.DstPod != ""):
		return []Flow{f}
	case f.FromSource == nil && f.FromDestination == nil:
		return []Flow{f}
	case denies(f.EgressPolicyAction) && !denies(f.IngressPolicyAction):
		// Denied on its way out of the source Pod: the destination's
		// Node never sees it. To a Pod the source Node does not hold, it
		// is inter-node (the agent could not tell).
		if fromSrc && f.FlowType == ipfix.FlowTypeToExternal && c.IsPodIP != nil && c.IsPodIP(f.DstIP) {
			f.FlowType = ipfix.FlowTypeInterNode
		}
		return []Flow{f}
	case c.IsPodIP != nil && fromSrc && !c.IsPodIP(f.DstIP):
		return []Flow{f}
	case c.IsPodIP != nil && !fromSrc && !c.IsPodIP(f.SrcIP):
		return []Flow{f}
	}
	k := f.key()
	p, ok := c.pending[k]
	if !ok {
		var out []Flow
		if max := c.maxPending(); len(c.pending) >= max {
			out = append(out, c.releaseOldest())
		}
		c.pending[k] = &pendingFlow{f: f, since: now}
		return out
	}
	if (p.f.FromSource != nil) == fromSrc {
		// The same node again before the partner came: the newer totals,
		// the deltas of both.
		p.f = mergeSameSide(p.f, f)
		return nil
	}
	delete(c.pending, k)
	c.Correlated++
	if fromSrc {
		return []Flow{join(f, p.f)}
	}
	return []Flow{join(p.f, f)}
}

func (c *Correlator) maxPending() int {
	if c.MaxPending > 0 {
		return c.MaxPending
	}
	return 65536
}

func (c *Correlator) releaseOldest() Flow {
	var oldest key
	var at time.Time
	first := true
	for k, p := range c.pending {
		if first || p.since.Before(at) {
			oldest, at, first = k, p.since, false
		}
	}
	f := c.pending[oldest].f
	delete(c.pending, oldest)
	c.Alone++
	return f
}

// Expire releases, alone, the records that waited Wait or longer by now.
func (c *Correlator) Expire(now time.Time) []Flow {
	var out []Flow
	for k, p := range c.pending {
		if now.Sub(p.since) >= c.Wait {
			out = append(out, p.f)
			delete(c.pending, k)
			c.Alone++
		}
	}
	return out
}

// Pending is how many records wait for their partner.
func (c *Correlator) Pending() int { return len(c.pending) }

// join makes one record of the source node's src and the destination
// node's dst: the source side's Pod, Node, Service and counts, the
// destination side's Pod, Node and counts.
func join(src, dst Flow) Flow {
	out := src
	out.DstPod, out.DstNamespace, out.DstNode, out.DstLabels = dst.DstPod, dst.DstNamespace, dst.DstNode, dst.DstLabels
	out.FromDestination = dst.FromDestination
	if dst.Start.Before(out.Start) {
		out.Start = dst.Start
	}
	if dst.End.After(out.End) {
		out.End = dst.End
	}
	if out.Service == "" {
		out.Service, out.ClusterIP, out.ServicePort = dst.Service, dst.ClusterIP, dst.ServicePort
	}
	// The destination Node enforces ingress rules, the source Node egress
	// rules.
	if dst.IngressPolicy != "" || dst.IngressPolicyAction != 0 {
		out.IngressPolicy, out.IngressPolicyType, out.IngressPolicyRule, out.IngressPolicyAction =
			dst.IngressPolicy, dst.IngressPolicyType, dst.IngressPolicyRule, dst.IngressPolicyAction
	}
	if out.EgressPolicy == "" && out.EgressPolicyAction == 0 && (dst.EgressPolicy != "" || dst.EgressPolicyAction != 0) {
		out.EgressPolicy, out.EgressPolicyType, out.EgressPolicyRule, out.EgressPolicyAction =
			dst.EgressPolicy, dst.EgressPolicyType, dst.EgressPolicyRule, dst.EgressPolicyAction
	}
	out.Denied = src.Denied || dst.Denied
	if dst.Received.After(out.Received) {
		out.Received = dst.Received
	}
	out.FlowType = ipfix.FlowTypeInterNode
	out.Correlated = true
	return out
}

// mergeSameSide folds a node's newer record of a connection into its older
// one that still waits.
func mergeSameSide(old, nw Flow) Flow {
	add := func(o, n *NodeCounts) {
		if o == nil || n == nil {
			return
		}
		n.Delta.Packets += o.Delta.Packets
		n.Delta.Bytes += o.Delta.Bytes
		n.ReverseDelta.Packets += o.ReverseDelta.Packets
		n.ReverseDelta.Bytes += o.ReverseDelta.Bytes
	}
	add(old.FromSource, nw.FromSource)
	add(old.FromDestination, nw.FromDestination)
	if old.Start.Before(nw.Start) {
		nw.Start = old.Start
	}
	return nw
}
