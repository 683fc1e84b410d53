package networkpolicy

// toFQDN rules (`to: [{fqdn: "api.example.com"}]`, `"*.example.com"`): the
// controller passes the rule's name patterns (NetworkPolicyPeer.FQDNs); this
// agent learns which addresses the names have from the DNS answers its
// own pods receive, and the rule's peers are those addresses.
//
//   - OVS pauses every DNS answer (UDP or TCP, from port 53, a reply of the
//     pod's own query) to a pod that a toFQDN rule applies to and sends it
//     here (agentof FQDN feature, packet-in kind PacketInDNS).
//   - The answer is parsed (golang.org/x/net/dns/dnsmessage; A and AAAA
//     records, CNAME chains followed back to the names asked); the
//     addresses it names are recorded in the FQDN cache, each until its
//     TTL ends (at least FQDNOptions.MinTTL).
//   - When an address is new, the policies with a pattern matching its
//     name are queued and the answer is held until each of them was
//     realized (its flows written and the datapath cache purged) from a
//     cache holding the address; then it is resumed and goes on to the pod.
//     The pod's first connection after the lookup meets the flows that
//     allow it. An answer is never held longer than FQDNOptions.MaxHold:
//     then it is released anyway (a write that failed is retried, the
//     pod's connection may be dropped meanwhile, never its DNS answer).
//   - Every second the addresses whose TTL passed are removed and the
//     policies of their names queued again; an address a live connection
//     still goes to (FQDNOptions.Live: conntrack) is kept until none does.
//   - With FQDNOptions.DNSServer, the agent resolves the exact names of
//     the rules itself, as upstream's agent does: at once when a rule
//     names one the cache does not hold, and again shortly before an
//     address of one expires, so a name's new addresses are allowed before
//     its pods ask for them.

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/flowexporter"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/util/dnsname"
)

// Defaults of FQDNOptions.
const (
	// DefaultFQDNMaxHold bounds how long a DNS answer waits for the flows
	// of the addresses it names (upstream holds it up to 2 s).
	DefaultFQDNMaxHold = time.Second
	// fqdnExpiryPeriod is how often expired addresses are removed.
	fqdnExpiryPeriod = time.Second
	// maxCNAMEDepth bounds the CNAME chains followed in one answer.
	maxCNAMEDepth = 8
)

// FQDNOptions configure toFQDN rules.
type FQDNOptions struct {
	// MinTTL is the shortest time an address learned from a DNS answer is
	// kept (the agent's fqdnCacheMinTTL): answers with a shorter TTL (0
	// included) keep their addresses this long. 0: the answer's TTL.
	MinTTL time.Duration
	// MaxHold bounds how long an answer is held (DefaultFQDNMaxHold when 0).
	MaxHold time.Duration
	// Flows writes the DNS interception flows (the agent's OpenFlow client).
	Flows interface {
		SetDNSInterceptPorts(ctx context.Context, ports []uint32) error
	}
	// DNSServer, if set ("10.96.0.10:53": dnsServerOverride, else the
	// cluster DNS Service), is asked by the agent itself, as upstream's
	// agent does, for the exact names of toFQDN rules: when a rule names
	// one the cache does not hold, and when an address of one is about to
	// expire. Patterns with "*" are learned from the pods' lookups only.
	DNSServer string
	// Dial opens the agent's connections to DNSServer (a net.Dialer's
	// DialContext when nil).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Live, if set, lists the destinations of the connections the
	// datapath tracks that are alive (TCP not closing, any other tracked
	// flow): an expired address one of them goes to is kept meanwhile.
	Live func(ctx context.Context) (map[netip.Addr]bool, error)
}

// dnsAnswer is one address a DNS answer gives a name.
type dnsAnswer struct {
	name string
	addr netip.Addr
	ttl  time.Duration
}

// fqdnCache holds the addresses learned for each name, with the time each
// expires. Its version grows with every change of the addresses, so a
// policy computed from version v holds every address learned up to v.
type fqdnCache struct {
	minTTL time.Duration

	mu      sync.RWMutex
	names   map[string]map[netip.Addr]time.Time
	version uint64
}

func newFQDNCache(minTTL time.Duration) *fqdnCache {
	return &fqdnCache{minTTL: minTTL, names: map[string]map[netip.Addr]time.Time{}}
}

// learn records the answers at now. It returns the names that gained an
// address (a known address only has its expiry extended) and the version
// that holds them.
func (c *fqdnCache) learn(now time.Time, answers []dnsAnswer) (gained sets.Set[string], version uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gained = sets.New[string]()
	for _, a := range answers {
		ttl := max(a.ttl, c.minTTL)
		exp := now.Add(ttl)
		addrs := c.names[a.name]
		if addrs == nil {
			addrs = map[netip.Addr]time.Time{}
			c.names[a.name] = addrs
		}
		old, known := addrs[a.addr]
		if !known {
			gained.Insert(a.name)
		}
		if !known || exp.After(old) {
			addrs[a.addr] = exp
		}
	}
	if gained.Len() > 0 {
		c.version++
	}
	return gained, c.version
}

// expiredAny reports whether an address's time passed at now.
func (c *fqdnCache) expiredAny(now time.Time) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, addrs := range c.names {
		for _, exp := range addrs {
			if !now.Before(exp) {
				return true
			}
		}
	}
	return false
}

// expire removes the addresses whose time passed at now, but those in
// live, and returns the names that lost one.
func (c *fqdnCache) expire(now time.Time, live map[netip.Addr]bool) sets.Set[string] {
	c.mu.Lock()
	defer c.mu.Unlock()
	lost := sets.New[string]()
	for name, addrs := range c.names {
		for a, exp := range addrs {
			if !now.Before(exp) && !live[a] {
				delete(addrs, a)
				lost.Insert(name)
			}
		}
		if len(addrs) == 0 {
			delete(c.names, name)
		}
	}
	if lost.Len() > 0 {
		c.version++
	}
	return lost
}

// currentVersion is the version of the addresses held now.
func (c *fqdnCache) currentVersion() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}

// addrs are the addresses of the names matching any of the patterns,
// sorted.
func (c *fqdnCache) addrs(patterns []string) []netip.Addr {
	c.mu.RLock()
	defer c.mu.RUnlock()
	seen := map[netip.Addr]bool{}
	for name, addrs := range c.names {
		if !matchesAny(patterns, name) {
			continue
		}
		for a := range addrs {
			seen[a] = true
		}
	}
	out := make([]netip.Addr, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// FQDNEntry is one address of a name in the FQDN cache.
type FQDNEntry struct {
	Name    string
	Addr    netip.Addr
	Expires time.Time
}

// entries lists the cache, by name then address.
func (c *fqdnCache) entries() []FQDNEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []FQDNEntry
	for name, addrs := range c.names {
		for a, exp := range addrs {
			out = append(out, FQDNEntry{Name: name, Addr: a, Expires: exp})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Addr.Less(out[j].Addr)
	})
	return out
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if dnsname.Match(p, name) {
			return true
		}
	}
	return false
}

// parseDNSAnswers reads the A and AAAA records of a DNS response. Each
// address is given to its owner name and to every name whose CNAME chain
// (in the same response) leads there, with the smallest TTL on the way.
// Anything but a successful response yields nothing.
func parseDNSAnswers(msg []byte) ([]dnsAnswer, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, err
	}
	if !h.Response || h.RCode != dnsmessage.RCodeSuccess {
		return nil, nil
	}
	if err := p.SkipAllQuestions(); err != nil {
		return nil, err
	}
	type rec struct {
		owner string
		addr  netip.Addr
		ttl   uint32
	}
	var addrs []rec
	// aliases: a CNAME's target -> the names pointing to it, with TTLs.
	type alias struct {
		name string
		ttl  uint32
	}
	aliases := map[string][]alias{}
	for {
		rh, err := p.AnswerHeader()
		if err == dnsmessage.ErrSectionDone {
			break
		}
		if err != nil {
			return nil, err
		}
		owner := dnsname.Normalize(rh.Name.String())
		switch rh.Type {
		case dnsmessage.TypeA:
			r, err := p.AResource()
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, rec{owner, netip.AddrFrom4(r.A), rh.TTL})
		case dnsmessage.TypeAAAA:
			r, err := p.AAAAResource()
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, rec{owner, netip.AddrFrom16(r.AAAA), rh.TTL})
		case dnsmessage.TypeCNAME:
			r, err := p.CNAMEResource()
			if err != nil {
				return nil, err
			}
			target := dnsname.Normalize(r.CNAME.String())
			aliases[target] = append(aliases[target], alias{owner, rh.TTL})
		default:
			if err := p.SkipAnswer(); err != nil {
				return nil, err
			}
		}
	}
	var out []dnsAnswer
	for _, r := range addrs {
		type step struct {
			name  string
			ttl   uint32
			depth int
		}
		seen := map[string]bool{}
		todo := []step{{r.owner, r.ttl, 0}}
		for len(todo) > 0 {
			s := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if seen[s.name] {
				continue
			}
			seen[s.name] = true
			out = append(out, dnsAnswer{name: s.name, addr: r.addr, ttl: time.Duration(s.ttl) * time.Second})
			if s.depth >= maxCNAMEDepth {
				continue
			}
			for _, a := range aliases[s.name] {
				todo = append(todo, step{a.name, min(s.ttl, a.ttl), s.depth + 1})
			}
		}
	}
	return out, nil
}

// tcpDNSStreams reassembles DNS messages sent over TCP (two bytes of
// length, then the message) from the segments of each connection, in
// order; a segment out of order drops what was gathered of its stream.
type tcpDNSStreams struct {
	mu      sync.Mutex
	streams map[tcpFlowKey]*tcpDNSStream
}

type tcpFlowKey struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
}

type tcpDNSStream struct {
	next uint32 // the sequence number expected
	buf  []byte
	seen time.Time
}

// maxTCPDNSBuffer bounds what is gathered of one stream (a DNS message is
// at most 65535 bytes, plus its length).
const maxTCPDNSBuffer = 65537

// tcpDNSIdle is how long a stream's partial message is kept without a
// segment.
const tcpDNSIdle = 10 * time.Second

// add takes a segment's payload and returns the DNS messages it completes.
func (s *tcpDNSStreams) add(now time.Time, k tcpFlowKey, seq uint32, payload []byte, fin bool) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams = map[tcpFlowKey]*tcpDNSStream{}
	}
	for key, st := range s.streams {
		if now.Sub(st.seen) > tcpDNSIdle {
			delete(s.streams, key)
		}
	}
	st := s.streams[k]
	if len(payload) == 0 {
		if fin {
			delete(s.streams, k)
		}
		return nil
	}
	switch {
	case st == nil:
		st = &tcpDNSStream{}
		s.streams[k] = st
	case st.next != seq:
		// A retransmission or a gap: start again at this segment (a
		// message that begins here is still read).
		st.buf = nil
	}
	st.next, st.seen = seq+uint32(len(payload)), now
	st.buf = append(st.buf, payload...)
	var msgs [][]byte
	for len(st.buf) >= 2 {
		n := int(binary.BigEndian.Uint16(st.buf))
		if len(st.buf) < 2+n {
			break
		}
		msgs = append(msgs, st.buf[2:2+n])
		st.buf = st.buf[2+n:]
	}
	if len(st.buf) > maxTCPDNSBuffer || fin {
		delete(s.streams, k)
	}
	return msgs
}

// dnsMessages are the DNS messages a packet-in's packet completes (UDP: its
// payload; TCP: what its segment completes of its stream).
func (f *fqdnState) dnsMessages(now time.Time, data []byte) ([][]byte, error) {
	pkt, err := packetreply.Parse(data)
	if err != nil {
		return nil, err
	}
	if !pkt.HasPorts || pkt.Total > len(pkt.IP) || pkt.Total < pkt.IHL {
		return nil, nil
	}
	l4 := pkt.IP[pkt.IHL:pkt.Total]
	switch pkt.Proto {
	case binding.IPProtoUDP:
		if len(l4) < 8 {
			return nil, nil
		}
		return [][]byte{l4[8:]}, nil
	case binding.IPProtoTCP:
		if len(l4) < 20 {
			return nil, nil
		}
		off := int(l4[12]>>4) * 4
		if off < 20 || off > len(l4) {
			return nil, nil
		}
		fin := l4[13]&0x01 != 0 || l4[13]&0x04 != 0 // FIN or RST
		k := tcpFlowKey{src: pkt.Src, dst: pkt.Dst, srcPort: pkt.SrcPort, dstPort: pkt.DstPort}
		return f.tcp.add(now, k, binary.BigEndian.Uint32(l4[4:]), l4[off:], fin), nil
	}
	return nil, nil
}

// fqdnState is the controller's toFQDN state.
type fqdnState struct {
	opts  FQDNOptions
	cache *fqdnCache
	tcp   tcpDNSStreams

	// mu guards realized and changed: the cache version each policy was
	// last realized from; changed is closed (and replaced) at every
	// realization, waking the held answers.
	mu       sync.Mutex
	realized map[string]uint64
	changed  chan struct{}
	// ports are the interception flows' ports last written.
	ports []uint32
	// resolve feeds the agent's own lookups (nil without DNSServer);
	// asked is when each name was last asked (guarded by mu).
	resolve chan string
	asked   map[string]time.Time
}

func newFQDNState(opts FQDNOptions) *fqdnState {
	if opts.MaxHold <= 0 {
		opts.MaxHold = DefaultFQDNMaxHold
	}
	f := &fqdnState{opts: opts, cache: newFQDNCache(opts.MinTTL), realized: map[string]uint64{}, changed: make(chan struct{}),
		asked: map[string]time.Time{}}
	if opts.DNSServer != "" {
		f.resolve = make(chan string, 256)
	}
	return f
}

// markRealized records that policy name was realized from cache version v
// (or is gone).
func (f *fqdnState) markRealized(name string, v uint64, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gone {
		delete(f.realized, name)
	} else if f.realized[name] < v {
		f.realized[name] = v
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitRealized waits until each policy was realized from version v or
// later, or is gone, or the hold ends; it says whether they all were.
func (f *fqdnState) waitRealized(ctx context.Context, policies sets.Set[string], v uint64, exists func(string) bool) bool {
	timer := time.NewTimer(f.opts.MaxHold)
	defer timer.Stop()
	for {
		f.mu.Lock()
		done := true
		for p := range policies {
			if f.realized[p] < v && exists(p) {
				done = false
				break
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// FQDNCache lists the addresses this agent learned for names of toFQDN
// rules (antctl get fqdncache); nil without toFQDN support.
func (c *Controller) FQDNCache() []FQDNEntry {
	if c.fqdn == nil {
		return nil
	}
	return c.fqdn.cache.entries()
}

// dnsPacketIn handles a paused DNS answer: learn its addresses, have the
// policies whose patterns match their names realized, then resume it.
func (c *Controller) dnsPacketIn(io agentof.PacketInRouter) agentof.PacketInHandler {
	return func(ctx context.Context, pi *binding.PacketIn) {
		resume := func() {
			if err := io.Resume(ctx, pi); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Cannot resume a DNS answer held for toFQDN rules")
			}
		}
		now := time.Now()
		msgs, err := c.fqdn.dnsMessages(now, pi.Data)
		if err != nil {
			klog.V(2).InfoS("DNS packet-in without a packet to read", "err", err)
		}
		var answers []dnsAnswer
		for _, m := range msgs {
			a, err := parseDNSAnswers(m)
			if err != nil {
				klog.V(2).InfoS("Cannot parse a DNS answer", "err", err)
				continue
			}
			answers = append(answers, a...)
		}
		if len(answers) == 0 {
			resume()
			return
		}
		gained, v := c.fqdn.cache.learn(now, answers)
		policies := c.cache.policiesForNames(gained)
		if policies.Len() == 0 {
			resume()
			return
		}
		klog.V(2).InfoS("DNS answer names new addresses of toFQDN rules; holding it until they are realized",
			"names", sets.List(gained), "policies", sets.List(policies))
		c.enqueue(policies)
		// Held in its own goroutine: the next answers are read meanwhile.
		go func() {
			if !c.fqdn.waitRealized(ctx, policies, v, c.cache.hasPolicy) {
				klog.InfoS("Releasing a DNS answer before its addresses were realized", "names", sets.List(gained),
					"maxHold", c.fqdn.opts.MaxHold)
			} else if c.opts.OnNarrowed != nil {
				// A megaflow the datapath cached while the address was
				// still dropped must not meet the pod's first packet.
				c.opts.OnNarrowed()
			}
			resume()
		}()
	}
}

// runFQDNExpiry removes expired addresses every fqdnExpiryPeriod and
// queues the policies of their names.
func (c *Controller) runFQDNExpiry(ctx context.Context) {
	t := time.NewTicker(fqdnExpiryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// The exact names of the rules whose addresses are about to
			// expire are asked again, and those not known yet.
			exact := c.cache.exactFQDNs()
			c.fqdn.requestResolve(now, c.fqdn.cache.expiringNames(now.Add(resolveAhead)).Intersection(exact), resolveRetry)
			unknown := sets.New[string]()
			for n := range exact {
				if !c.fqdn.cache.has(n) {
					unknown.Insert(n)
				}
			}
			c.fqdn.requestResolve(now, unknown, resolveUnknownRetry)
			if !c.fqdn.cache.expiredAny(now) {
				continue
			}
			var live map[netip.Addr]bool
			if c.fqdn.opts.Live != nil {
				var err error
				if live, err = c.fqdn.opts.Live(ctx); err != nil {
					// Without the list nothing expires: an allowed
					// connection is never cut for want of it.
					klog.ErrorS(err, "Cannot list live connections; keeping the expired addresses of toFQDN names")
					continue
				}
			}
			if lost := c.fqdn.cache.expire(now, live); lost.Len() > 0 {
				policies := c.cache.policiesForNames(lost)
				klog.V(2).InfoS("Addresses of toFQDN names expired", "names", sets.List(lost), "policies", sets.List(policies))
				c.enqueue(policies)
			}
		}
	}
}

// syncDNSIntercept writes the interception flows of the ports toFQDN
// rules apply to, when they changed.
func (c *Controller) syncDNSIntercept(ctx context.Context) error {
	if c.fqdn == nil || c.fqdn.opts.Flows == nil {
		return nil
	}
	ports := c.cache.fqdnPorts(c.ifaces)
	c.fqdn.mu.Lock()
	same := slices.Equal(ports, c.fqdn.ports)
	c.fqdn.mu.Unlock()
	if same {
		return nil
	}
	if err := c.fqdn.opts.Flows.SetDNSInterceptPorts(ctx, ports); err != nil {
		return err
	}
	c.fqdn.mu.Lock()
	c.fqdn.ports = ports
	c.fqdn.mu.Unlock()
	klog.V(2).InfoS("DNS answers to these pod ports go through the agent for toFQDN rules", "ports", ports)
	return nil
}

// hasFQDN reports whether a rule has toFQDN peers.
func hasFQDN(r *cpv1beta2.NetworkPolicyRule) bool {
	return r.Direction == cpv1beta2.DirectionOut && len(r.To.FQDNs) > 0
}

// policiesForNames are the policies with a toFQDN rule whose patterns
// match one of the names.
func (c *ruleCache) policiesForNames(names sets.Set[string]) sets.Set[string] {
	out := sets.New[string]()
	if names.Len() == 0 {
		return out
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for pname, p := range c.policies {
		for i := range p.Rules {
			r := &p.Rules[i]
			if !hasFQDN(r) {
				continue
			}
			for n := range names {
				if matchesAny(r.To.FQDNs, n) {
					out.Insert(pname)
					break
				}
			}
		}
	}
	return out
}

// hasPolicy reports whether a policy is in the cache.
func (c *ruleCache) hasPolicy(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.policies[name]
	return ok
}

// fqdnPorts are the local pod ports toFQDN rules apply to, sorted.
func (c *ruleCache) fqdnPorts(ifaces Interfaces) []uint32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ports := sets.New[uint32]()
	for _, p := range c.policies {
		for i := range p.Rules {
			r := &p.Rules[i]
			if !hasFQDN(r) {
				continue
			}
			names := p.AppliedToGroups
			if len(r.AppliedToGroups) > 0 {
				names = r.AppliedToGroups
			}
			applied, _ := c.appliedTargetsLocked(names, ifaces)
			for _, t := range applied {
				if t.port != 0 {
					ports.Insert(t.port)
				}
			}
		}
	}
	return sets.List(ports)
}

// liveTCPStates are the TCP states of a connection still in use: neither
// side has closed it.
var liveTCPStates = sets.New("SYN_SENT", "SYN_RECV", "ESTABLISHED", "CLOSE_WAIT")

// ConntrackLive lists, from a conntrack source, the original destinations
// of the live connections (FQDNOptions.Live): TCP connections neither side
// closed, and every other tracked flow (UDP and ICMP entries live until
// their idle timeout).
func ConntrackLive(src flowexporter.ConnectionSource) func(ctx context.Context) (map[netip.Addr]bool, error) {
	return func(ctx context.Context) (map[netip.Addr]bool, error) {
		conns, err := src.Connections(ctx)
		if err != nil {
			return nil, err
		}
		live := map[netip.Addr]bool{}
		for _, c := range conns {
			if c.Orig.Proto == binding.IPProtoTCP && !liveTCPStates.Has(c.TCPState) {
				continue
			}
			live[c.Orig.Dst] = true
		}
		return live, nil
	}
}

// Re-resolution by the agent itself (FQDNOptions.DNSServer).
const (
	// resolveAhead: an exact name is asked again when one of its
	// addresses expires within this time.
	resolveAhead = 2 * time.Second
	// resolveRetry is the shortest time between two questions for a name
	// about to expire, resolveUnknownRetry for a name without address (it
	// may not exist).
	resolveRetry        = time.Second
	resolveUnknownRetry = 30 * time.Second
	// resolveTimeout bounds one question.
	resolveTimeout = 3 * time.Second
)

// expiringNames are the names with an address that expires before t.
func (c *fqdnCache) expiringNames(t time.Time) sets.Set[string] {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := sets.New[string]()
	for name, addrs := range c.names {
		for _, exp := range addrs {
			if exp.Before(t) {
				out.Insert(name)
				break
			}
		}
	}
	return out
}

// has reports whether the cache holds an address of name.
func (c *fqdnCache) has(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.names[name]) > 0
}

// exactFQDNs are the names without wildcard of the cached policies'
// toFQDN rules.
func (c *ruleCache) exactFQDNs() sets.Set[string] {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := sets.New[string]()
	for _, p := range c.policies {
		for i := range p.Rules {
			if r := &p.Rules[i]; hasFQDN(r) {
				for _, f := range r.To.FQDNs {
					if !dnsname.IsWildcard(f) {
						out.Insert(f)
					}
				}
			}
		}
	}
	return out
}

// requestResolve asks the resolver for names (those asked less than retry
// ago are left out).
func (f *fqdnState) requestResolve(now time.Time, names sets.Set[string], retry time.Duration) {
	if f.resolve == nil {
		return
	}
	f.mu.Lock()
	var todo []string
	for n := range names {
		if last, ok := f.asked[n]; ok && now.Sub(last) < retry {
			continue
		}
		f.asked[n] = now
		todo = append(todo, n)
	}
	f.mu.Unlock()
	for _, n := range todo {
		select {
		case f.resolve <- n:
		default: // the resolver is behind: the next round asks again
		}
	}
}

// runResolver asks the DNS server for the names requested and learns the
// answers as a pod's lookup would teach them (without holding anything).
func (c *Controller) runResolver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-c.fqdn.resolve:
			answers, err := queryDNS(ctx, c.fqdn.opts, name)
			if err != nil {
				klog.V(2).InfoS("Cannot resolve a name of a toFQDN rule", "name", name, "server", c.fqdn.opts.DNSServer, "err", err)
				continue
			}
			gained, _ := c.fqdn.cache.learn(time.Now(), answers)
			if policies := c.cache.policiesForNames(gained); policies.Len() > 0 {
				klog.V(2).InfoS("The agent's own lookup found new addresses of toFQDN names", "names", sets.List(gained),
					"policies", sets.List(policies))
				c.enqueue(policies)
			}
		}
	}
}

// queryDNS asks the DNS server for a name's A records, over UDP.
func queryDNS(ctx context.Context, o FQDNOptions, name string) ([]dnsAnswer, error) {
	qn, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return nil, err
	}
	id := uint16(time.Now().UnixNano())
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(dnsmessage.Question{Name: qn, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		return nil, err
	}
	query, err := b.Finish()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	dial := o.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "udp", o.DNSServer)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, 65535)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil || h.ID != id {
			continue // not the answer to this question
		}
		if h.Truncated {
			return nil, fmt.Errorf("the answer for %s is truncated", name)
		}
		return parseDNSAnswers(buf[:n])
	}
}
