package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// PacketIO is the switch's packet-in and packet-out channel as the proxy
// uses it: it registers its handler for the packet-ins of Services without
// endpoints (agentof.PacketInServiceReject) and sends the answers.
type PacketIO = agentof.PacketInRouter

// rejectPacketIn answers a packet the data path sent up because its
// Service port has no endpoints (EndpointDNAT's reject flow, behind the
// reject meter): a TCP reset to a TCP packet, an ICMP port unreachable to a
// UDP datagram, so the client's connect or send fails at once instead of
// timing out (kube-proxy's REJECT). The answer is output straight to the
// port the packet came in on: it never enters the pipeline, so it can never
// come back as another packet-in.
func (p *Proxy) rejectPacketIn(ctx context.Context, pi *openflow.PacketIn) {
	po, err := rejectPacketOut(pi)
	if err != nil {
		if !errors.Is(err, packetreply.ErrNoReply) {
			klog.V(2).InfoS("Cannot reject packet of a Service without endpoints", "err", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.packets.SendPacketOut(ctx, po); err != nil {
		klog.ErrorS(err, "Cannot send the reject of a packet to a Service without endpoints")
		return
	}
	p.rejected.Add(1)
}

// Rejected counts the packets answered with a reset or port unreachable.
func (p *Proxy) Rejected() uint64 { return p.rejected.Load() }

// rejectPacketOut builds the packet-out answering a packet-in: the reply
// output to the packet's in_port (with the tunnel destination set to the
// sender's node when it came through the tunnel).
func rejectPacketOut(pi *openflow.PacketIn) (*openflow.PacketOut, error) {
	in, ok := pi.Match.Get(openflow.FieldInPort)
	if !ok {
		return nil, fmt.Errorf("packet-in without in_port")
	}
	reply, err := rejectReply(pi.Data)
	if err != nil {
		return nil, err
	}
	var acts []openflow.Action
	// Back to the tunnel peer it came from, over the underlay's family.
	for _, f := range [][2]openflow.Field{{openflow.FieldTunSrc, openflow.FieldTunDst}, {openflow.FieldTunIPv6Src, openflow.FieldTunIPv6Dst}} {
		if tun, ok := pi.Match.Get(f[0]); ok && !tun.Value.IsZero() {
			acts = append(acts, &openflow.SetField{Field: f[1], Value: tun.Value})
		}
	}
	acts = append(acts, &openflow.Output{Port: uint32(in.Value.Lo)})
	return &openflow.PacketOut{Actions: acts, Data: reply}, nil
}

// rejectReply answers an Ethernet frame holding an IPv4 packet to a Service
// port without endpoints: a TCP segment gets a reset, a UDP datagram an
// ICMP port unreachable quoting it, anything else nothing. The reply comes
// from the address and port the client asked for (the Service: the packet
// is not DNATed when there is no endpoint).
func rejectReply(frame []byte) ([]byte, error) {
	p, err := packetreply.Parse(frame)
	if err != nil {
		return nil, err
	}
	return packetreply.Reply(p, packetreply.Answer{From: p.Dst, FromPort: p.DstPort,
		Reason: packetreply.PortUnreachable, UDPOnly: true})
}
