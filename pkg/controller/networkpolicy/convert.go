package networkpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/grouping"
)

// k8sRulePriority marks every rule of a K8s NetworkPolicy: its rules form a
// union with no order among them, and -1 is the value upstream Antrea agents
// recognize for that.
const k8sRulePriority int32 = -1

// matchAllIPBlocks is what an empty or absent peer list turns into: every
// IPv4 and IPv6 address. Using IPBlocks rather than an all-pods AddressGroup
// keeps membership churn out of such rules.
func matchAllIPBlocks() []controlplane.IPBlock {
	return []controlplane.IPBlock{
		{CIDR: controlplane.IPNet{IP: controlplane.IPAddress(net.IPv4zero.To4()), PrefixLength: 0}},
		{CIDR: controlplane.IPNet{IP: controlplane.IPAddress(net.IPv6zero), PrefixLength: 0}},
	}
}

// computedPolicy is a K8s NetworkPolicy turned into internal rules, before
// group names are attached to policy state.
type computedPolicy struct {
	rules []controlplane.NetworkPolicyRule
	// appliedTo is the selector of the policy's single AppliedToGroup.
	appliedTo *grouping.Selector
	// addressGroups are the distinct peer selectors, by key.
	addressGroups map[string]*grouping.Selector
}

// effectivePolicyTypes applies the API defaulting the API server would do
// (clients and fakes may skip it): no policyTypes means Ingress, plus Egress
// when egress rules are present.
func effectivePolicyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// computePolicy turns a K8s NetworkPolicy into internal rules, with group
// names derived from their normalized selectors by groupName.
//
// Isolation: a direction the policy isolates (per effectivePolicyTypes) but
// for which it has no rule gets one rule with an empty peer and no services.
// Such a rule matches no traffic, so the agent installs only the default drop
// for the applied-to Pods in that direction — this is how upstream Antrea
// represents "default deny". Rules of a direction the policy does not isolate
// are dropped, as Kubernetes ignores them.
func computePolicy(np *networkingv1.NetworkPolicy, groupName func(selectorKey string) string) (*computedPolicy, error) {
	appliedTo, err := grouping.NewSelector(np.Namespace, &np.Spec.PodSelector, nil)
	if err != nil {
		return nil, fmt.Errorf("podSelector of NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
	}
	ingress, egress := effectivePolicyTypes(np)
	nRules := 0
	if ingress {
		nRules += max(len(np.Spec.Ingress), 1)
	}
	if egress {
		nRules += max(len(np.Spec.Egress), 1)
	}
	cp := &computedPolicy{appliedTo: appliedTo, rules: make([]controlplane.NetworkPolicyRule, 0, nRules)}
	if ingress {
		for i := range np.Spec.Ingress {
			r := &np.Spec.Ingress[i]
			services, named := toServices(r.Ports)
			peer, err := cp.toPeer(np, r.From, controlplane.DirectionIn, named, groupName)
			if err != nil {
				return nil, fmt.Errorf("ingress rule %d of NetworkPolicy %s/%s: %w", i, np.Namespace, np.Name, err)
			}
			cp.rules = append(cp.rules, controlplane.NetworkPolicyRule{
				Direction: controlplane.DirectionIn, From: peer, Services: services, Priority: k8sRulePriority,
			})
		}
		if len(np.Spec.Ingress) == 0 {
			cp.rules = append(cp.rules, controlplane.NetworkPolicyRule{Direction: controlplane.DirectionIn, Priority: k8sRulePriority})
		}
	}
	if egress {
		for i := range np.Spec.Egress {
			r := &np.Spec.Egress[i]
			services, named := toServices(r.Ports)
			peer, err := cp.toPeer(np, r.To, controlplane.DirectionOut, named, groupName)
			if err != nil {
				return nil, fmt.Errorf("egress rule %d of NetworkPolicy %s/%s: %w", i, np.Namespace, np.Name, err)
			}
			cp.rules = append(cp.rules, controlplane.NetworkPolicyRule{
				Direction: controlplane.DirectionOut, To: peer, Services: services, Priority: k8sRulePriority,
			})
		}
		if len(np.Spec.Egress) == 0 {
			cp.rules = append(cp.rules, controlplane.NetworkPolicyRule{Direction: controlplane.DirectionOut, Priority: k8sRulePriority})
		}
	}
	return cp, nil
}

// toPeer converts a rule's peers. Absent and empty lists both mean "every
// address" (Kubernetes treats them alike). The agent resolves the named
// ports of an egress rule against the members of the peer's AddressGroups
// (ingress named ports resolve against the applied-to members instead), and
// Kubernetes resolves them on the destination Pod whatever kind of peer
// matched its address. So an egress rule with a named port gets, besides its
// ipBlocks, the AddressGroup of the Pods inside each block (minus except);
// to every address, that is the all-Pods AddressGroup, as upstream Antrea
// does. An address of a block that is no Pod's resolves no named port.
func (cp *computedPolicy) toPeer(np *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, dir controlplane.Direction, namedPort bool, groupName func(string) string) (controlplane.NetworkPolicyPeer, error) {
	var out controlplane.NetworkPolicyPeer
	if len(peers) == 0 {
		out.IPBlocks = matchAllIPBlocks()
		if dir == controlplane.DirectionOut && namedPort {
			all, err := grouping.NewSelector("", nil, &metav1.LabelSelector{})
			if err != nil {
				return out, err
			}
			out.AddressGroups = []string{cp.addAddressGroup(all, groupName)}
		}
		return out, nil
	}
	for i := range peers {
		p := &peers[i]
		// The API server validates peers; one that is still invalid is left
		// out with an error log, as upstream does. That narrows the rule
		// (a rule left without peers matches nothing) rather than opening it.
		if p.IPBlock != nil {
			b, err := toIPBlock(p.IPBlock.CIDR, p.IPBlock.Except)
			if err != nil {
				klog.ErrorS(err, "Ignoring invalid ipBlock peer", "networkPolicy", klog.KObj(np), "peer", i)
				continue
			}
			out.IPBlocks = append(out.IPBlocks, b)
			if dir == controlplane.DirectionOut && namedPort {
				name := cp.addAddressGroup(ipBlockSelector(b), groupName)
				if !slicesContains(out.AddressGroups, name) {
					out.AddressGroups = append(out.AddressGroups, name)
				}
			}
			continue
		}
		sel, err := grouping.NewSelector(np.Namespace, p.PodSelector, p.NamespaceSelector)
		if err != nil {
			klog.ErrorS(err, "Ignoring invalid selector peer", "networkPolicy", klog.KObj(np), "peer", i)
			continue
		}
		name := cp.addAddressGroup(sel, groupName)
		if !slicesContains(out.AddressGroups, name) {
			out.AddressGroups = append(out.AddressGroups, name)
		}
	}
	return out, nil
}

func (cp *computedPolicy) addAddressGroup(sel *grouping.Selector, groupName func(string) string) string {
	if cp.addressGroups == nil {
		cp.addressGroups = make(map[string]*grouping.Selector, 1)
	}
	cp.addressGroups[sel.Key()] = sel
	return groupName(sel.Key())
}

// toServices converts rule ports; a numeric or named port, endPort and
// protocol (TCP when unset) are kept as written, so the agent resolves named
// ports per member. It also reports whether a named port is present.
func toServices(ports []networkingv1.NetworkPolicyPort) ([]controlplane.Service, bool) {
	if len(ports) == 0 {
		return nil, false
	}
	named := false
	out := make([]controlplane.Service, 0, len(ports))
	for i := range ports {
		p := &ports[i]
		proto := controlplane.ProtocolTCP
		if p.Protocol != nil {
			proto = controlplane.Protocol(*p.Protocol)
		}
		s := controlplane.Service{Protocol: &proto}
		if p.Port != nil {
			port := *p.Port
			s.Port = &port
			if port.Type == intstr.String {
				named = true
			}
		}
		if p.EndPort != nil {
			end := *p.EndPort
			s.EndPort = &end
		}
		out = append(out, s)
	}
	return out, named
}

// toIPBlock converts an ipBlock (of a K8s NetworkPolicy peer, an Antrea-native
// peer or a group) and its exceptions.
func toIPBlock(cidr string, except []string) (controlplane.IPBlock, error) {
	n, err := toIPNet(cidr)
	if err != nil {
		return controlplane.IPBlock{}, err
	}
	out := controlplane.IPBlock{CIDR: n}
	for _, e := range except {
		ex, err := toIPNet(e)
		if err != nil {
			return controlplane.IPBlock{}, fmt.Errorf("except: %w", err)
		}
		out.Except = append(out.Except, ex)
	}
	return out, nil
}

// ipBlockSelector is the index selector of the Pods inside a converted block.
func ipBlockSelector(b controlplane.IPBlock) *grouping.Selector {
	except := make([]netip.Prefix, 0, len(b.Except))
	for _, e := range b.Except {
		except = append(except, ipNetPrefix(e))
	}
	return grouping.NewIPBlockSelector(ipNetPrefix(b.CIDR), except)
}

// ipNetPrefix converts an IPNet made by toIPNet, which is always valid.
func ipNetPrefix(n controlplane.IPNet) netip.Prefix {
	a, _ := netip.AddrFromSlice(n.IP)
	return netip.PrefixFrom(a, int(n.PrefixLength))
}

// prefixIPNet is the API form of a prefix.
func prefixIPNet(p netip.Prefix) controlplane.IPNet {
	return controlplane.IPNet{IP: controlplane.IPAddress(p.Addr().AsSlice()), PrefixLength: int32(p.Bits())}
}

func toIPNet(cidr string) (controlplane.IPNet, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return controlplane.IPNet{}, fmt.Errorf("invalid CIDR %q: %w", cidr, err)
	}
	ones, _ := n.Mask.Size()
	return controlplane.IPNet{IP: ipAddress(n.IP), PrefixLength: int32(ones)}, nil
}

// ipAddress stores IPv4 addresses in 4 bytes and IPv6 in 16, as the API says.
func ipAddress(ip net.IP) controlplane.IPAddress {
	if v4 := ip.To4(); v4 != nil {
		return controlplane.IPAddress(v4)
	}
	return controlplane.IPAddress(ip.To16())
}

// podMemberBlock holds a Pod's GroupMember with its PodReference and
// addresses in one allocation: 100,000 Pods otherwise cost half a million
// small objects. It holds no pointer to the Pod object, so a member kept by
// a group does not keep an old version of the Pod alive.
type podMemberBlock struct {
	member controlplane.GroupMember
	ref    controlplane.PodReference
	ips    [1]controlplane.IPAddress
	// buf holds the address bytes of one IPv6 or four IPv4 addresses.
	buf [16]byte
}

// parseIPs parses the Pod's addresses into the block (spilling to the heap
// beyond its room), as net.ParseIP would: IPv4 (also IPv4-mapped) in 4
// bytes, IPv6 in 16, invalid ones (and zoned ones) left out.
func (b *podMemberBlock) parseIPs(pod *v1.Pod) []controlplane.IPAddress {
	out := b.ips[:0]
	free := b.buf[:]
	add := func(s string) {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return
		}
		a = a.Unmap()
		n := 16
		if a.Is4() {
			n = 4
		}
		var ip []byte
		if len(free) >= n {
			ip, free = free[:n:n], free[n:]
		} else {
			ip = make([]byte, n)
		}
		if n == 4 {
			v := a.As4()
			copy(ip, v[:])
		} else {
			v := a.As16()
			copy(ip, v[:])
		}
		out = append(out, controlplane.IPAddress(ip))
	}
	if len(pod.Status.PodIPs) == 0 {
		if pod.Status.PodIP != "" {
			add(pod.Status.PodIP)
		}
	} else {
		for _, ip := range pod.Status.PodIPs {
			add(ip.IP)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// namedPorts lists the named container ports of a Pod, which the agent needs
// to resolve named ports in rules (protocol TCP when unset).
func namedPorts(pod *v1.Pod) []controlplane.NamedPort {
	var out []controlplane.NamedPort
	for ci := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[ci].Ports {
			if p.Name == "" {
				continue
			}
			proto := controlplane.ProtocolTCP
			if p.Protocol != "" {
				proto = controlplane.Protocol(p.Protocol)
			}
			out = append(out, controlplane.NamedPort{Name: p.Name, Port: p.ContainerPort, Protocol: proto})
		}
	}
	return out
}

// podMember builds the GroupMember of a Pod (see podMemberBlock).
func podMember(pod *v1.Pod) *controlplane.GroupMember {
	b := &podMemberBlock{ref: controlplane.PodReference{Namespace: pod.Namespace, Name: pod.Name}}
	b.member = controlplane.GroupMember{Pod: &b.ref, IPs: b.parseIPs(pod), Ports: namedPorts(pod)}
	return &b.member
}

// podMemberKey is controlplane.MemberKey of a Pod's member, built on the
// stack: the string is its only allocation, at its exact size.
func podMemberKey(m *controlplane.GroupMember) string {
	var buf [128]byte
	b := append(buf[:0], "pod:"...)
	b = append(b, m.Pod.Namespace...)
	b = append(b, '/')
	b = append(b, m.Pod.Name...)
	for _, ip := range m.IPs {
		b = append(b, '|')
		if a, ok := netip.AddrFromSlice(ip); ok && (len(ip) == 4 || !a.Is4In6()) {
			b = a.AppendTo(b)
		} else {
			// What net.IP.String does differently (IPv4-mapped, bad lengths).
			b = append(b, net.IP(ip).String()...)
		}
	}
	for _, p := range m.Ports {
		b = append(b, '|')
		b = append(b, p.Name...)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(p.Port), 10)
		b = append(b, '/')
		b = append(b, p.Protocol...)
	}
	return string(b)
}

// podTerminated tells whether a Pod has finished: its IP may already belong
// to another Pod, so it is no member of any group.
func podTerminated(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}
