package networkpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/flowexporter"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/ipfix"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// PacketIns is what the controller needs to serve its rules' packet-ins
// (Reject and audit logging).
type PacketIns struct {
	// IO is where the controller registers its handler of the packet-ins
	// of kind agentof.PacketInPolicy, and sends the packet-outs of rejects.
	IO agentof.PacketInRouter
	// Parser reads a policy packet-in (the agent's OpenFlow client).
	Parser interface {
		ParsePolicyPacketIn(pi *binding.PacketIn) (agentof.PolicyPacketIn, bool)
	}
	// AuditLogDir is where np.log is written (DefaultAuditLogDir).
	AuditLogDir string
}

// policyPacketIn handles a packet-in of a logging or rejecting rule. It
// reads the reconciler's record of rules under its own read lock only, so
// it never waits on an OVS write.
func (c *Controller) policyPacketIn(pins *PacketIns, audit *auditLogger) agentof.PacketInHandler {
	return func(ctx context.Context, pi *binding.PacketIn) {
		ppi, ok := pins.Parser.ParsePolicyPacketIn(pi)
		if !ok {
			return
		}
		pkt, err := packetreply.Parse(pi.Data)
		if err != nil {
			klog.V(2).InfoS("Policy packet-in without an IPv4 packet", "err", err)
			return
		}
		if ppi.Log && audit != nil {
			audit.log(c.auditEntry(ppi, pkt))
		}
		if ppi.Reject {
			if err := c.reject(ctx, pins.IO, pi, pkt); err != nil && !errors.Is(err, packetreply.ErrNoReply) {
				klog.V(2).InfoS("Cannot answer a rejected packet", "src", pkt.Src, "dst", pkt.Dst, "err", err)
			}
		}
		if ppi.Deny && c.opts.Denied != nil && (ppi.Action == agentof.ActionDrop || ppi.Action == agentof.ActionReject) {
			c.opts.Denied(c.deniedPacket(ppi, pkt, time.Now()))
		}
	}
}

// deniedPacket is what the FlowExporter keeps of a denied packet: its
// 5-tuple, the Service address it dialled (the conntrack tuple the
// packet-in carries, when the connection is a Service's), its length, and
// the rule that denied it, named: a rule by its policy and name, the
// isolation of K8s NetworkPolicies by the policies isolating the local Pod
// in that direction (comma-separated; upstream leaves the name empty). For a
// packet an ingress rule denied, the egress rule that had allowed it (its id
// in EgressRuleIDField) is named too.
func (c *Controller) deniedPacket(ppi agentof.PolicyPacketIn, pkt *packetreply.Packet, now time.Time) flowexporter.DeniedPacket {
	d := flowexporter.DeniedPacket{
		Tuple: flowexporter.Tuple{Proto: pkt.Proto, Src: pkt.Src, Dst: pkt.Dst, SrcPort: pkt.SrcPort, DstPort: pkt.DstPort},
		Bytes: uint64(pkt.Total), Ingress: ppi.Direction == agentof.DirectionIngress, Time: now,
	}
	pi := ppi.Packet
	if v, ok := pi.Match.Get(agentof.ServiceCTMark.Field); ok && v.Value.Lo&1 != 0 {
		if ip, ok := pi.Match.Get(binding.FieldCTNwDst); ok {
			lo := ip.Value.Lo
			d.ServiceIP = netip.AddrFrom4([4]byte{byte(lo >> 24), byte(lo >> 16), byte(lo >> 8), byte(lo)})
			d.ServicePort = d.Tuple.DstPort
			if p, ok := pi.Match.Get(binding.FieldCTTpDst); ok {
				d.ServicePort = uint16(p.Value.Lo)
			}
			if d.ServiceIP == d.Tuple.Dst && d.ServicePort == d.Tuple.DstPort {
				d.ServiceIP, d.ServicePort = netip.Addr{}, 0
			}
		}
	}
	action := ipfix.RuleActionDrop
	if ppi.Action == agentof.ActionReject {
		action = ipfix.RuleActionReject
	}
	if info, ok := c.reconciler.ruleInfo(ppi.RuleID); ok && ppi.RuleID != 0 {
		d.Rule = flowexporter.NamedRule(info.policy, info.name, action)
	} else if ppi.RuleID == 0 {
		d.Rule = c.isolationRule(ppi.Direction, pkt)
	}
	if d.Ingress {
		if v, ok := pi.Match.Get(agentof.EgressRuleIDField.Field); ok && v.Value.Lo != 0 {
			if info, ok := c.reconciler.ruleInfo(uint32(v.Value.Lo)); ok {
				d.Allowed = flowexporter.NamedRule(info.policy, info.name, ipfix.RuleActionAllow)
			}
		}
	}
	return d
}

// isolationRule names the isolation of K8s NetworkPolicies that dropped a
// packet: type K8s, action drop, the namespace and names of the policies
// that isolate the local Pod (the destination for ingress, the source for
// egress) in that direction.
func (c *Controller) isolationRule(dir agentof.Direction, pkt *packetreply.Packet) flowexporter.PolicyRule {
	r := flowexporter.PolicyRule{Type: ipfix.PolicyTypeK8s, Action: ipfix.RuleActionDrop}
	local := pkt.Dst
	if dir == agentof.DirectionEgress {
		local = pkt.Src
	}
	iface, ok := c.ifaces.GetInterfaceByIP(local.String())
	if !ok || iface.ContainerInterfaceConfig == nil || iface.OFPort <= 0 {
		return r
	}
	var names []string
	for _, ref := range c.TraceflowIsolation(uint32(iface.OFPort), dir) {
		p := flowexporter.NamedRule(ref, "", ipfix.RuleActionDrop)
		r.Namespace = p.Namespace
		names = append(names, p.Name)
	}
	r.Name = strings.Join(names, ",")
	return r
}

// auditEntry is the log line of a packet a rule decided on.
func (c *Controller) auditEntry(ppi agentof.PolicyPacketIn, pkt *packetreply.Packet) *auditEntry {
	e := &auditEntry{table: ppi.Table, direction: ppi.Direction.String(), action: ppi.Action.String(), src: pkt.Src, dst: pkt.Dst,
		protocol: protocolName(pkt.Proto), length: strconv.Itoa(pkt.Total)}
	if pkt.HasPorts {
		e.srcPort, e.dstPort = portString(pkt.SrcPort), portString(pkt.DstPort)
	}
	if info, ok := c.reconciler.ruleInfo(ppi.RuleID); ok {
		e.policy, e.rule, e.label, e.priority = info.policy, info.name, info.logLabel, strconv.Itoa(int(info.priority))
	} else if ppi.RuleID == 0 {
		// No rule: the isolation drop of K8s NetworkPolicies, which
		// upstream logs under the kind's name alone.
		e.policy = string(cpv1beta2.K8sNetworkPolicy)
	}
	local := pkt.Dst
	if ppi.Direction == agentof.DirectionEgress {
		local = pkt.Src
	}
	if iface, ok := c.ifaces.GetInterfaceByIP(local.String()); ok && iface.ContainerInterfaceConfig != nil && iface.PodName != "" {
		e.appliedTo = iface.PodNamespace + "/" + iface.PodName
	}
	return e
}

// reject answers a packet a Reject rule dropped: a TCP reset to a TCP
// segment, an ICMP "host administratively prohibited" to anything else
// (but an ICMP error). The answer comes from the address (and port) the
// client sent to, the original destination of a Service connection (the
// conntrack tuple the packet-in carries) rather than the endpoint, and is
// output straight to the port the packet came in on (through the tunnel
// back to its node): it never enters the pipeline, so no policy sees it
// and it cannot come back as a packet-in.
func (c *Controller) reject(ctx context.Context, io agentof.PacketInRouter, pi *binding.PacketIn, pkt *packetreply.Packet) error {
	in, ok := pi.Match.Get(binding.FieldInPort)
	if !ok {
		return fmt.Errorf("packet-in without in_port")
	}
	from, fromPort := pkt.Dst, pkt.DstPort
	if v, ok := pi.Match.Get(agentof.ServiceCTMark.Field); ok && v.Value.Lo&1 != 0 {
		if d, ok := pi.Match.Get(binding.FieldCTNwDst); ok && !pkt.IPv6 {
			from = d.Value.IPv4()
		}
		if d, ok := pi.Match.Get(binding.FieldCTIPv6Dst); ok && pkt.IPv6 {
			from = d.Value.IPv6()
		}
		if p, ok := pi.Match.Get(binding.FieldCTTpDst); ok {
			fromPort = uint16(p.Value.Lo)
		}
	}
	// The client's MAC: a local pod's own (the frame may have been routed
	// on its way here and carry the gateway's), else the frame's source.
	dstMAC := net.HardwareAddr(pkt.Frame[6:12])
	// (The gateway, whose traffic from outside the node a rule may reject,
	// has no container part.)
	if iface, ok := c.ifaces.GetInterfaceByOFPort(int32(in.Value.Lo)); ok && iface.MAC != nil && iface.ContainerInterfaceConfig != nil && iface.PodName != "" {
		dstMAC = iface.MAC
	}
	reply, err := packetreply.Reply(pkt, packetreply.Answer{From: from, FromPort: fromPort, DstMAC: dstMAC,
		Reason: packetreply.AdminProhibited})
	if err != nil {
		return err
	}
	var acts []binding.Action
	// Back to the tunnel peer it came from, over the underlay's family.
	for _, f := range [][2]binding.Field{{binding.FieldTunSrc, binding.FieldTunDst}, {binding.FieldTunIPv6Src, binding.FieldTunIPv6Dst}} {
		if tun, ok := pi.Match.Get(f[0]); ok && !tun.Value.IsZero() {
			acts = append(acts, &binding.SetField{Field: f[1], Value: tun.Value})
		}
	}
	acts = append(acts, &binding.Output{Port: binding.PortInPort})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return io.SendPacketOut(ctx, &binding.PacketOut{InPort: uint32(in.Value.Lo), Actions: acts, Data: reply})
}
