package nodenet

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

// The hostport feature's chains.
const (
	// hostPortPrerouting and hostPortOutput (nat, dstnat) jump to
	// hostPortDNAT: traffic entering the node and the node's own.
	hostPortPrerouting = "hostport-prerouting"
	hostPortOutput     = "hostport-output"
	// hostPortDNAT holds one DNAT rule per mapping and pod address family.
	hostPortDNAT = "hostport-dnat"
	// hostPortPostrouting (nat, srcnat) masquerades what the DNAT cannot
	// carry as it is: a loopback source, a pod reaching a hostPort through
	// the node.
	hostPortPostrouting = "hostport-postrouting"
	// hostPortInput (filter) drops what route_localnet would let in: a new
	// connection to 127.0.0.0/8 from outside the node (CVE-2020-8558).
	hostPortInput = "hostport-input"
)

// loopbackNet is IPv4's loopback network. IPv6 has no route_localnet: a
// packet from ::1 never leaves the node, so a hostPort on ::1 is reached
// by the node's own connections to ::1 from one of its other addresses
// (as upstream's HostPort Conformance spec connects on IPv6: curl
// --interface NODE-IP http://[::1]:PORT), which its DNAT carries like any
// other; no masquerade or input rule is needed for it.
var loopbackNet = netip.MustParsePrefix("127.0.0.0/8")

// PodHostPorts is one pod attachment's hostPorts.
type PodHostPorts struct {
	// Pod names the pod ("namespace/name") in rule comments and errors.
	Pod string
	// IPs are the pod's addresses: a mapping goes to the one of its family.
	IPs []netip.Addr
	// Mappings are the attachment's hostPorts.
	Mappings []types.PortMapping
}

// ConflictError says that a mapping claims a node port another pod holds.
type ConflictError struct {
	// Index is the mapping's index in the refused PodHostPorts.Mappings.
	Index   int
	Mapping types.PortMapping
	// Other is the holder: its pod and mapping.
	OtherPod string
	Other    types.PortMapping
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("hostPort %s conflicts with %s of pod %s", e.Mapping, e.Other, e.OtherPod)
}

// HostPortConfig says how hostPorts reach pods on this node.
type HostPortConfig struct {
	// GatewayName is the node's gateway to its pods (antrea-gw0): DNATed
	// connections leave through it.
	GatewayName string
	// ProcSys is where the node's network namespace's sysctls are read and
	// written ("/proc/sys" when empty; the caller's network namespace).
	ProcSys string
}

// HostPorts is the hostport feature: it DNATs each pod's hostPorts to the
// pod, for connections entering the node and for the node's own, on every
// local address (HostIP unset), one address, or 127.0.0.1. A connection to
// 127.0.0.1 leaves the node's loopback for the gateway, which the kernel
// allows only with route_localnet on the gateway (set in the node's network
// namespace, never the host's) and a masquerade of the loopback source; the
// hostport-input chain drops, as kube-proxy does since CVE-2020-8558, what
// that sysctl would otherwise let in from outside.
//
// The pods' mappings are recorded by attachment key (the CNI server's
// container ID and interface) and every change rewrites the feature's
// chains from the whole record in one transaction; the record changes only
// after the kernel took the transaction.
type HostPorts struct {
	table *Table
	cfg   HostPortConfig

	mu       sync.Mutex
	pods     map[string]PodHostPorts
	localnet bool // route_localnet is set on the gateway
}

// HostPorts returns the table's hostport feature.
func (t *Table) HostPorts(cfg HostPortConfig) *HostPorts {
	if cfg.ProcSys == "" {
		cfg.ProcSys = "/proc/sys"
	}
	return &HostPorts{table: t, cfg: cfg, pods: map[string]PodHostPorts{}}
}

// Restore installs the hostPorts of every pod at once (at start, from the
// interface store): the chains are rewritten, so mappings of pods deleted
// while the agent was down go away.
func (h *HostPorts) Restore(ctx context.Context, pods map[string]PodHostPorts) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := map[string]PodHostPorts{}
	for k, p := range pods {
		if len(p.Mappings) > 0 {
			want[k] = p
		}
	}
	if err := h.syncLocked(ctx, want); err != nil {
		return err
	}
	h.pods = want
	klog.InfoS("Restored hostPorts", "pods", len(want), "table", string(TableFamily)+" "+TableName)
	return nil
}

// Add installs one attachment's hostPorts (replacing what key had). It
// refuses, with a *ConflictError, a mapping that claims a node port another
// attachment holds, and writes nothing then.
func (h *HostPorts) Add(ctx context.Context, key string, p PodHostPorts) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, m := range p.Mappings {
		for _, k := range slices.Sorted(maps.Keys(h.pods)) {
			if k == key {
				continue
			}
			for _, o := range h.pods[k].Mappings {
				if m.Overlaps(o) {
					return &ConflictError{Index: i, Mapping: m, OtherPod: h.pods[k].Pod, Other: o}
				}
			}
		}
	}
	want := maps.Clone(h.pods)
	if len(p.Mappings) == 0 {
		if _, ok := want[key]; !ok {
			return nil
		}
		delete(want, key)
	} else {
		want[key] = p
	}
	if err := h.syncLocked(ctx, want); err != nil {
		return fmt.Errorf("hostPorts of pod %s: %w", p.Pod, err)
	}
	h.pods = want
	return nil
}

// Delete removes one attachment's hostPorts; an unknown key is no error.
func (h *HostPorts) Delete(ctx context.Context, key string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.pods[key]
	if !ok {
		return nil
	}
	want := maps.Clone(h.pods)
	delete(want, key)
	if err := h.syncLocked(ctx, want); err != nil {
		return fmt.Errorf("remove hostPorts of pod %s: %w", p.Pod, err)
	}
	h.pods = want
	return nil
}

// Installed returns the hostPorts recorded for key.
func (h *HostPorts) Installed(key string) []types.PortMapping {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.pods[key].Mappings)
}

func (h *HostPorts) syncLocked(ctx context.Context, pods map[string]PodHostPorts) error {
	if !h.localnet && len(pods) > 0 {
		// Before the first rule: a DNAT to a pod of a connection to
		// 127.0.0.1 is useless without it. A node that never had a
		// hostPort keeps the kernel's default.
		if err := h.setRouteLocalnet(); err != nil {
			return err
		}
		h.localnet = true
	}
	return h.table.run(ctx, func(tx *knftables.Transaction) { hostPortTx(tx, h.cfg.GatewayName, pods) })
}

// setRouteLocalnet lets loopback-sourced packets leave through the gateway
// (the DNATed connections to 127.0.0.1) and their replies come back.
func (h *HostPorts) setRouteLocalnet() error {
	p := filepath.Join(h.cfg.ProcSys, "net/ipv4/conf", h.cfg.GatewayName, "route_localnet")
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("set route_localnet on %s (for hostPorts on 127.0.0.1): %w", h.cfg.GatewayName, err)
	}
	klog.InfoS("Set route_localnet on the gateway for hostPorts on 127.0.0.1", "gateway", h.cfg.GatewayName)
	return nil
}

// hostPortTx declares the feature's chains, empties them and writes the
// rules of pods, in a stable order (pods by key, mappings as given).
func hostPortTx(tx *knftables.Transaction, gateway string, pods map[string]PodHostPorts) {
	chains := []*knftables.Chain{
		baseChain(hostPortPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority),
		baseChain(hostPortOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority),
		baseChain(hostPortPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority),
		baseChain(hostPortInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority),
		{Name: hostPortDNAT, Comment: knftables.PtrTo("Antrea: pods' hostPorts")},
	}
	for _, c := range chains {
		tx.Add(c)
		tx.Flush(c)
	}
	for _, r := range hostPortRules(gateway, pods) {
		tx.Add(r)
	}
}

// hostPortRules are the feature's rules for pods.
func hostPortRules(gateway string, pods map[string]PodHostPorts) []*knftables.Rule {
	rule := func(chain string, comment string, parts ...any) *knftables.Rule {
		r := &knftables.Rule{Chain: chain, Rule: knftables.Concat(parts...)}
		if comment != "" {
			r.Comment = knftables.PtrTo(truncate(comment, knftables.CommentLengthMax))
		}
		return r
	}
	rules := []*knftables.Rule{
		rule(hostPortPrerouting, "", "jump", hostPortDNAT),
		rule(hostPortOutput, "", "jump", hostPortDNAT),
		rule(hostPortPostrouting, "Antrea: hostPorts on 127.0.0.1 reach pods from the gateway address",
			"meta nfproto ipv4", "ip saddr", loopbackNet, "oifname", quote(gateway), "ct status dnat", "masquerade"),
		rule(hostPortInput, "Antrea: no connection to 127.0.0.0/8 from outside the node (route_localnet)",
			"meta nfproto ipv4", "iifname !=", quote("lo"), "ip daddr", loopbackNet, "ct state new", "drop"),
	}
	for _, k := range slices.Sorted(maps.Keys(pods)) {
		p := pods[k]
		for _, m := range p.Mappings {
			for _, ip := range p.IPs {
				if m.HostIP.IsValid() && types.FamilyOf(m.HostIP) != types.FamilyOf(ip) {
					continue
				}
				fam, nfproto := "ip", "ipv4"
				if ip.Is6() {
					fam, nfproto = "ip6", "ipv6"
				}
				proto := types.ProtocolName(m.Protocol)
				dst := "fib daddr type local"
				if m.HostIP.IsValid() {
					dst = fam + " daddr " + m.HostIP.String()
				}
				to := netip.AddrPortFrom(ip, m.ContainerPort).String()
				rules = append(rules, rule(hostPortDNAT, fmt.Sprintf("%s %s", p.Pod, m),
					"meta nfproto", nfproto, dst, proto, "dport", m.HostPort, "dnat", fam, "to", to))
				// A pod of this node reaching a hostPort through the
				// node (its own included): the node sends it back through
				// the gateway, and without the masquerade the pod's reply
				// would go straight back through OVS, around the un-DNAT.
				rules = append(rules, rule(hostPortPostrouting, fmt.Sprintf("%s %s from a local pod", p.Pod, m),
					"meta nfproto", nfproto, "iifname", quote(gateway), "oifname", quote(gateway),
					fam, "daddr", ip, proto, "dport", m.ContainerPort, "ct status dnat", "masquerade"))
			}
		}
	}
	return rules
}

func quote(s string) string { return `"` + s + `"` }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
