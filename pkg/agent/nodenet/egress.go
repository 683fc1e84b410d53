package nodenet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// egressPostrouting (nat, at srcnat - 10, before masquerade-postrouting) is
// the Egress feature's chain: the first NAT binding of a connection wins, so
// a pod's traffic that an Egress selects leaves with its Egress IP and the
// masquerade to the node's address never applies to it.
const egressPostrouting = "egress-postrouting"

// egressPrerouting (filter, at mangle) marks the packets of the pods whose
// Egress IP is in a subnet of its own (a pool with subnetInfo): the node's
// ip rules route packets with such a mark through that subnet's gateway
// (pkg/agent/egress, subnet.go).
const egressPrerouting = "egress-prerouting"

// EgressMarkMap is the map, per family, from a pod IP to the mark of its
// Egress IP's subnet.
const EgressMarkMap = "egress-mark"

// EgressSNATMap is the map, per family (suffix "-v4" or "-v6"), from a pod
// IP to the Egress IP its traffic leaving the node takes.
const EgressSNATMap = "egress-snat"

func egressMarkMap(v6 bool) string {
	if v6 {
		return EgressMarkMap + "-v6"
	}
	return EgressMarkMap + "-v4"
}

func egressSNATMap(v6 bool) string {
	if v6 {
		return EgressSNATMap + "-v6"
	}
	return EgressSNATMap + "-v4"
}

// EgressSNAT is the whole desired state of the Egress feature on this node.
type EgressSNAT struct {
	// Gateway is the gateway interface: traffic leaving through it goes to
	// pods and is never SNATed.
	Gateway string
	// Routed says the node routes pod traffic to other nodes over the
	// underlay (noEncap): then traffic to the set of cluster pod CIDRs
	// (SetClusterPodCIDRs, written by MasqueradeRouted) keeps its source.
	Routed bool
	// SNAT maps the IP of a pod (on this node or tunnelled here from
	// another) to the Egress IP of the Egress that selects it, held by
	// this node. A pod not in it is left to the masquerade.
	SNAT map[netip.Addr]netip.Addr
	// Marks maps the IP of a pod in SNAT whose Egress IP is in a subnet
	// of its own to that subnet's packet mark.
	Marks map[netip.Addr]uint32
}

// SetEgressSNAT rewrites the Egress feature's chain and maps from the whole
// desired state, in one transaction: a connection from a pod in the map that
// leaves the node through any interface but the gateway is SNATed to its
// Egress IP. The kernel's conntrack un-NATs the replies and routes them to
// the pod (through the gateway, and for a pod of another node on through
// the tunnel). Upstream marks such packets in OVS and SNATs by mark; with
// the userspace datapath a packet mark does not cross from OVS into the
// node's stack, so the pod's source address is the key here.
func (t *Table) SetEgressSNAT(ctx context.Context, want EgressSNAT) error {
	err := t.run(ctx, func(tx *knftables.Transaction) {
		c := baseChain(egressPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority+"-10")
		tx.Add(c)
		tx.Flush(c)
		pre := baseChain(egressPrerouting, knftables.FilterType, knftables.PreroutingHook, knftables.ManglePriority)
		tx.Add(pre)
		tx.Flush(pre)
		for _, v6 := range []bool{false, true} {
			fam, nfproto, typ := "ip", "ipv4", "ipv4_addr : ipv4_addr"
			if v6 {
				fam, nfproto, typ = "ip6", "ipv6", "ipv6_addr : ipv6_addr"
			}
			m := &knftables.Map{Name: egressSNATMap(v6), Type: typ,
				Comment: knftables.PtrTo("pod IP : the Egress IP its traffic leaving the node takes")}
			tx.Add(m)
			tx.Flush(m)
			pods := make([]netip.Addr, 0, len(want.SNAT))
			for pod, eip := range want.SNAT {
				if pod.Is6() == v6 && eip.Is6() == v6 {
					pods = append(pods, pod)
				}
			}
			slices.SortFunc(pods, func(a, b netip.Addr) int { return a.Compare(b) })
			for _, pod := range pods {
				tx.Add(&knftables.Element{Map: m.Name, Key: []string{pod.String()}, Value: []string{want.SNAT[pod].String()}})
			}
			rule := []any{"meta nfproto", nfproto}
			if want.Routed {
				tx.Add(clusterPodCIDRSetObj(v6))
				rule = append(rule, fam, "daddr !=", "@"+clusterPodCIDRSet(v6))
			}
			rule = append(rule, "oifname !=", quote(want.Gateway), "snat", fam, "to", fam, "saddr map", "@"+m.Name)
			tx.Add(&knftables.Rule{Chain: egressPostrouting, Rule: knftables.Concat(rule...),
				Comment: knftables.PtrTo("Antrea: Egress, pod traffic leaving the node takes its Egress IP")})

			mm := &knftables.Map{Name: egressMarkMap(v6), Type: strings.Fields(typ)[0] + " : mark",
				Comment: knftables.PtrTo("pod IP : the mark of its Egress IP's subnet")}
			tx.Add(mm)
			tx.Flush(mm)
			marked := slices.DeleteFunc(slices.Clone(pods), func(p netip.Addr) bool { _, ok := want.Marks[p]; return !ok })
			for _, pod := range marked {
				tx.Add(&knftables.Element{Map: mm.Name, Key: []string{pod.String()}, Value: []string{fmt.Sprintf("0x%08x", want.Marks[pod])}})
			}
			tx.Add(&knftables.Rule{Chain: egressPrerouting,
				Rule:    knftables.Concat("meta nfproto", nfproto, "meta mark set", fam, "saddr map", "@"+mm.Name),
				Comment: knftables.PtrTo("Antrea: Egress, pod traffic whose Egress IP has a subnet of its own leaves by its gateway")})
		}
	})
	if err != nil {
		return fmt.Errorf("egress SNAT of %d pods: %w", len(want.SNAT), err)
	}
	return nil
}
