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
	// denials remembers, per connection, the record that showed it
	// denied (joined, or one side's alone). A Node keeps exporting a
	// denied connection while its conntrack entry lives (a SYN_SENT entry
	// retried, a UDP flow; the source's entry of a connection its own
	// egress rule dropped after EndpointDNAT committed it), but the denial
	// is reported once, so those later records have no partner: they take
	// the remembered denial (its rule, and the other side's Pod) instead
	// of reading as allowed connections to or from an unknown address.
	denials map[key]denial
	// denialOrder lists the remembered denials oldest first, so that
	// forgetting the expired ones and the oldest beyond maxDenials costs
	// what it forgets, not a scan of all (a flood of denied connections
	// fills the memory); a key remembered again leaves a stale entry,
	// skipped when it comes up.
	denialOrder []denialRef
	// Correlated counts joined pairs; Alone records released without the
	// partner they waited for; Redenied records that took a remembered
	// denial.
	Correlated, Alone, Redenied uint64
}

type denial struct {
	f  Flow
	at time.Time
}

type denialRef struct {
	k  key
	at time.Time
}

// DenialMemory is how long a connection's denial is remembered for the
// Nodes' later records of it; maxDenials bounds how many are (beyond, the
// oldest are forgotten).
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
	k := f.key()
	if d, ok := c.denials[k]; ok && !f.Denied && (f.FromSource != nil) != (f.FromDestination != nil) {
		if now.Sub(d.at) < DenialMemory {
			c.Redenied++
			return []Flow{withDenial(f, d.f)}
		}
		delete(c.denials, k)
	}
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
		c.rememberDenial(k, f, now)
		return []Flow{f}
	case c.IsPodIP != nil && fromSrc && !c.IsPodIP(f.DstIP):
		return []Flow{f}
	case c.IsPodIP != nil && !fromSrc && !c.IsPodIP(f.SrcIP):
		return []Flow{f}
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
	out := join(src, dst)
	if out.Denied {
		c.rememberDenial(k, out, now)
	}
	return []Flow{out}
}

// rememberDenial records f, a record that shows connection k denied,
// forgetting the oldest denial beyond maxDenials.
func (c *Correlator) rememberDenial(k key, f Flow, now time.Time) {
	if c.denials == nil {
		c.denials = map[key]denial{}
	}
	c.denials[k] = denial{f: f, at: now}
	c.denialOrder = append(c.denialOrder, denialRef{k: k, at: now})
	c.forgetDenials(func(denialRef) bool { return len(c.denials) > maxDenials })
}

// forgetDenials forgets the oldest denials while old says so of the
// oldest; stale entries of denialOrder go on the way.
func (c *Correlator) forgetDenials(old func(denialRef) bool) {
	i := 0
	for ; i < len(c.denialOrder); i++ {
		r := c.denialOrder[i]
		d, ok := c.denials[r.k]
		if ok && !d.at.Equal(r.at) {
			continue // remembered again later
		}
		if ok && !old(r) {
			break
		}
		delete(c.denials, r.k)
	}
	c.denialOrder = c.denialOrder[i:]
	if cap(c.denialOrder) > 64 && len(c.denialOrder) < cap(c.denialOrder)/4 {
		c.denialOrder = append([]denialRef(nil), c.denialOrder...)
	}
}

// withDenial is one Node's later record f of a connection that d showed
// denied: d's rule and the other side's Pod, with only f's counts (d's
// were reported with it).
func withDenial(f, d Flow) Flow {
	var out Flow
	if f.FromSource != nil {
		out = join(f, d)
		out.FromDestination = nil
	} else {
		out = join(d, f)
		out.FromSource = nil
		// join takes the source side's times and Node's view; f is the
		// destination's.
		out.Start, out.End, out.Received = f.Start, f.End, f.Received
	}
	if denies(d.IngressPolicyAction) && !denies(out.IngressPolicyAction) {
		out.IngressPolicy, out.IngressPolicyType, out.IngressPolicyRule, out.IngressPolicyAction =
			d.IngressPolicy, d.IngressPolicyType, d.IngressPolicyRule, d.IngressPolicyAction
	}
	if denies(d.EgressPolicyAction) && !denies(out.EgressPolicyAction) {
		out.EgressPolicy, out.EgressPolicyType, out.EgressPolicyRule, out.EgressPolicyAction =
			d.EgressPolicy, d.EgressPolicyType, d.EgressPolicyRule, d.EgressPolicyAction
	}
	out.Denied = true
	out.Correlated = false
	// d's type: an egress denial's record learned the destination is a Pod.
	out.FlowType = d.FlowType
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
	c.forgetDenials(func(r denialRef) bool { return now.Sub(r.at) >= DenialMemory })
	return out
}

// rememberAlone remembers the denial a record released without its
// partner shows: the other Node's records may come later.
func (c *Correlator) rememberAlone(k key, f Flow, now time.Time) {
	if f.Denied {
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
