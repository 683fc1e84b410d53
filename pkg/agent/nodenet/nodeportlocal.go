package nodenet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

// The nodeportlocal feature's chains and maps (NodePortLocal, driven by
// pkg/agent/nodeportlocal).
const (
	// nplPrerouting and nplOutput (nat, dstnat) DNAT connections to a node
	// address and a NodePortLocal port: traffic entering the node and the
	// node's own.
	nplPrerouting = "nodeportlocal-prerouting"
	nplOutput     = "nodeportlocal-output"
	// nplPostrouting (nat, srcnat) masquerades a pod of this node reaching
	// a NodePortLocal port through the node, so the answer comes back
	// through the node's conntrack (as hostport-postrouting does).
	nplPostrouting = "nodeportlocal-postrouting"
	// NodePortLocalMap is the map, per family (suffix "-v4" or "-v6"),
	// from (protocol . node port) to (pod address . pod port).
	NodePortLocalMap = "nodeportlocal"
	// NodePortLocalPortSet holds, per protocol (suffix "-tcp" or "-udp"),
	// every mapped node port of both families: the hairpin masquerade
	// matches on it (nft cannot concatenate "ct original proto-dst").
	NodePortLocalPortSet = "nodeportlocal-ports"
)

// nplProtocols are the protocols NodePortLocal maps.
var nplProtocols = []uint8{types.ProtocolTCP, types.ProtocolUDP}

func nplPortSet(protocol uint8) string {
	return NodePortLocalPortSet + "-" + types.ProtocolName(protocol)
}

func nplMap(v6 bool) string {
	if v6 {
		return NodePortLocalMap + "-v6"
	}
	return NodePortLocalMap + "-v4"
}

// NodePortLocalRule is one NodePortLocal mapping: connections to any local
// address of the node on NodePort (Protocol) go to Pod.
type NodePortLocalRule struct {
	// Protocol is types.ProtocolTCP or types.ProtocolUDP.
	Protocol uint8
	NodePort uint16
	// Pod is the pod's address (its family picks the map) and port.
	Pod netip.AddrPort
}

func (r NodePortLocalRule) String() string {
	return fmt.Sprintf("%s/%d->%s", types.ProtocolName(r.Protocol), r.NodePort, r.Pod)
}

// SetNodePortLocal rewrites the nodeportlocal feature's chains and maps from
// the whole desired state, in one transaction. Connections to a local
// address of the node (fib daddr type local: the node IP on br-phy, any
// other address of the node's) on a mapped port are DNATed to the pod:
// from outside in prerouting, from the node's own processes in output; the
// kernel routes them through the gateway into br-int, and its conntrack
// un-DNATs the answers, which the pod sends to its gateway. Two rules with
// the same (protocol, node port) and family are refused: the caller
// allocates ports.
func (t *Table) SetNodePortLocal(ctx context.Context, gateway string, rules []NodePortLocalRule) error {
	type key struct {
		v6       bool
		protocol uint8
		port     uint16
	}
	seen := map[key]NodePortLocalRule{}
	for _, r := range rules {
		k := key{r.Pod.Addr().Is6(), r.Protocol, r.NodePort}
		if o, ok := seen[k]; ok {
			return fmt.Errorf("NodePortLocal rules %s and %s claim the same node port", o, r)
		}
		if r.Protocol != types.ProtocolTCP && r.Protocol != types.ProtocolUDP {
			return fmt.Errorf("NodePortLocal rule %s: only TCP and UDP are supported", r)
		}
		seen[k] = r
	}
	err := t.run(ctx, func(tx *knftables.Transaction) { nodePortLocalTx(tx, gateway, rules) })
	if err != nil {
		return fmt.Errorf("NodePortLocal, %d rules: %w", len(rules), err)
	}
	return nil
}

// nodePortLocalTx declares the feature's chains, maps and set, empties them
// and writes rules, in a stable order.
func nodePortLocalTx(tx *knftables.Transaction, gateway string, rules []NodePortLocalRule) {
	for _, c := range []*knftables.Chain{
		baseChain(nplPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority),
		baseChain(nplOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority),
		baseChain(nplPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority),
	} {
		tx.Add(c)
		tx.Flush(c)
	}
	for _, p := range nplProtocols {
		ports := &knftables.Set{Name: nplPortSet(p), Type: "inet_service",
			Comment: knftables.PtrTo("NodePortLocal node ports, " + types.ProtocolName(p))}
		tx.Add(ports)
		tx.Flush(ports)
	}
	sorted := slices.Clone(rules)
	slices.SortFunc(sorted, func(a, b NodePortLocalRule) int {
		if a.Protocol != b.Protocol {
			return int(a.Protocol) - int(b.Protocol)
		}
		if a.NodePort != b.NodePort {
			return int(a.NodePort) - int(b.NodePort)
		}
		return a.Pod.Compare(b.Pod)
	})
	inSet := map[NodePortLocalRule]bool{}
	for _, r := range sorted {
		if k := (NodePortLocalRule{Protocol: r.Protocol, NodePort: r.NodePort}); !inSet[k] {
			inSet[k] = true
			tx.Add(&knftables.Element{Set: nplPortSet(r.Protocol), Key: []string{fmt.Sprint(r.NodePort)}})
		}
	}
	for _, v6 := range []bool{false, true} {
		fam, nfproto, addr := "ip", "ipv4", "ipv4_addr"
		if v6 {
			fam, nfproto, addr = "ip6", "ipv6", "ipv6_addr"
		}
		m := &knftables.Map{Name: nplMap(v6), Type: "inet_proto . inet_service : " + addr + " . inet_service",
			Comment: knftables.PtrTo("NodePortLocal: protocol . node port : pod address . pod port")}
		tx.Add(m)
		tx.Flush(m)
		for _, r := range sorted {
			if r.Pod.Addr().Is6() != v6 {
				continue
			}
			tx.Add(&knftables.Element{Map: m.Name,
				Key:     []string{types.ProtocolName(r.Protocol), fmt.Sprint(r.NodePort)},
				Value:   []string{r.Pod.Addr().String(), fmt.Sprint(r.Pod.Port())},
				Comment: knftables.PtrTo(r.String())})
		}
		dnat := knftables.Concat("meta nfproto", nfproto, "fib daddr type local",
			"dnat", fam, "to meta l4proto . th dport map", "@"+m.Name)
		tx.Add(&knftables.Rule{Chain: nplPrerouting, Rule: dnat,
			Comment: knftables.PtrTo("Antrea: NodePortLocal, DNAT to the pod")})
		tx.Add(&knftables.Rule{Chain: nplOutput, Rule: dnat,
			Comment: knftables.PtrTo("Antrea: NodePortLocal, the node's own connections")})
		// A pod of this node reaching a NodePortLocal port through the node:
		// the DNATed connection goes back out through the gateway, and
		// without the masquerade the answer would go straight back through
		// OVS, around the un-DNAT.
		for _, p := range nplProtocols {
			tx.Add(&knftables.Rule{Chain: nplPostrouting, Rule: knftables.Concat("meta nfproto", nfproto,
				"iifname", quote(gateway), "oifname", quote(gateway), "ct status dnat",
				"meta l4proto", types.ProtocolName(p), "ct original proto-dst", "@"+nplPortSet(p), "masquerade"),
				Comment: knftables.PtrTo("Antrea: NodePortLocal from a local pod")})
		}
	}
}

// RemoveNodePortLocal deletes the feature's chains, maps and set; what is
// not there is no error.
func (t *Table) RemoveNodePortLocal(ctx context.Context) error {
	return t.run(ctx, func(tx *knftables.Transaction) {
		for _, c := range []string{nplPrerouting, nplOutput, nplPostrouting} {
			ch := &knftables.Chain{Name: c}
			tx.Add(ch)
			tx.Flush(ch)
			tx.Delete(ch)
		}
		for _, v6 := range []bool{false, true} {
			addr := "ipv4_addr"
			if v6 {
				addr = "ipv6_addr"
			}
			m := &knftables.Map{Name: nplMap(v6), Type: "inet_proto . inet_service : " + addr + " . inet_service"}
			tx.Add(m)
			tx.Delete(m)
		}
		for _, p := range nplProtocols {
			s := &knftables.Set{Name: nplPortSet(p), Type: "inet_service"}
			tx.Add(s)
			tx.Delete(s)
		}
	})
}
