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
	// denials remembers, per connection, the destination Node's record
	// that denied it. The source Node keeps exporting a denied
	// connection while its conntrack entry lives (a SYN_SENT entry
	// retried, a UDP flow), but the destination Node reports a denial
	// once, so those later records have no partner; they take the
	// remembered denial instead of reading as allowed.
	denials map[key]denial
	// Correlated counts joined pairs; Alone records released without the
	// partner they waited for; Redenied source records that took a
	// remembered denial.
	Correlated, Alone, Redenied uint64
}

type denial struct {
	dst Flow
	at  time.Time
}

// DenialMemory is how long a connection's denial at its destination is
// remembered for the source Node's later records of it; maxDenials bounds
// how many are (beyond, the oldest are forgotten).
const (
	DenialMemory = 5 * time.Minute
	maxDenials   = 16384
)

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
	if d, ok := c.denials[k]; ok && fromSrc {
		if now.Sub(d.at) < DenialMemory {
			c.Redenied++
			return []Flow{withDenial(f, d.dst)}
		}
		delete(c.denials, k)
	}
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
	src, dst := p.f, f
	if fromSrc {
		src, dst = f, p.f
	}
	if denies(dst.IngressPolicyAction) {
		c.rememberDenial(k, dst, now)
	}
	return []Flow{join(src, dst)}
}

// rememberDenial records that the destination Node denied connection k.
func (c *Correlator) rememberDenial(k key, dst Flow, now time.Time) {
	if c.denials == nil {
		c.denials = map[key]denial{}
	}
	if _, ok := c.denials[k]; !ok && len(c.denials) >= maxDenials {
		for dk, d := range c.denials {
			if now.Sub(d.at) >= DenialMemory {
				delete(c.denials, dk)
			}
		}
		if len(c.denials) >= maxDenials {
			var oldest key
			var at time.Time
			first := true
			for dk, d := range c.denials {
				if first || d.at.Before(at) {
					oldest, at, first = dk, d.at, false
				}
			}
			delete(c.denials, oldest)
		}
	}
	c.denials[k] = denial{dst: dst, at: now}
}

// withDenial is a source Node's record of a connection its destination
// Node denied earlier: named and marked as the denial was, with only the
// source's counts (the destination's were reported with the denial).
func withDenial(src, dst Flow) Flow {
	out := join(src, dst)
	out.FromDestination = nil
	out.Correlated = false
	return out
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
	c.rememberAlone(oldest, f, at)
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
			c.rememberAlone(k, p.f, now)
		}
	}
	for k, d := range c.denials {
		if now.Sub(d.at) >= DenialMemory {
			delete(c.denials, k)
		}
	}
	return out
}

// rememberAlone remembers the denial of a destination Node's record
// released without its partner: the source's record may come later.
func (c *Correlator) rememberAlone(k key, f Flow, now time.Time) {
	if f.FromSource == nil && denies(f.IngressPolicyAction) {
		c.rememberDenial(k, f, now)
	}
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
