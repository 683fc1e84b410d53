// Package apis holds the JSON bodies of the agent API (pkg/agent/apiserver)
// and their conversions, shared by the server and antctl, its client.
package apis

import (
	"fmt"
	"net"
	"time"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agenttypes "antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// PodInterface is one pod interface of the node (GET /podinterfaces), the
// fields of upstream's agent API.
type PodInterface struct {
	PodName       string   `json:"name"`
	PodNamespace  string   `json:"podNamespace"`
	InterfaceName string   `json:"interfaceName"`
	IPs           []string `json:"ips,omitempty"`
	MAC           string   `json:"mac,omitempty"`
	PortUUID      string   `json:"portUUID,omitempty"`
	OFPort        int32    `json:"ofPort"`
	ContainerID   string   `json:"containerID,omitempty"`
	IFDev         string   `json:"ifDev,omitempty"`
}

// NewPodInterface describes a container interface of the interface store.
func NewPodInterface(i *interfacestore.InterfaceConfig) PodInterface {
	p := PodInterface{InterfaceName: i.InterfaceName}
	if i.ContainerInterfaceConfig != nil {
		p.PodName, p.PodNamespace, p.ContainerID, p.IFDev = i.PodName, i.PodNamespace, i.ContainerID, i.IFDev
	}
	for _, ip := range i.IPs {
		p.IPs = append(p.IPs, ip.String())
	}
	if i.MAC != nil {
		p.MAC = i.MAC.String()
	}
	if i.OVSPortConfig != nil {
		p.PortUUID, p.OFPort = i.PortUUID, i.OFPort
	}
	return p
}

// InterfaceConfig is the interface store entry p describes.
func (p PodInterface) InterfaceConfig() (*interfacestore.InterfaceConfig, error) {
	var ips []net.IP
	for _, s := range p.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("pod interface %s: ips: %q is not an IP address", p.InterfaceName, s)
		}
		ips = append(ips, net.IP(agenttypes.Addr(ip).AsSlice())) // 4 bytes for IPv4
	}
	var mac net.HardwareAddr
	if p.MAC != "" {
		var err error
		if mac, err = net.ParseMAC(p.MAC); err != nil {
			return nil, fmt.Errorf("pod interface %s: mac: %w", p.InterfaceName, err)
		}
	}
	c := interfacestore.NewContainerInterface(p.InterfaceName, p.ContainerID, p.PodName, p.PodNamespace, p.IFDev, mac, ips, 0)
	if p.PortUUID != "" || p.OFPort != 0 {
		c.OVSPortConfig = &interfacestore.OVSPortConfig{PortUUID: p.PortUUID, OFPort: p.OFPort}
	}
	return c, nil
}

// Flow is one OpenFlow flow of the node's bridge with its counters (GET
// /ovsflows).
type Flow struct {
	Table        uint8  `json:"table"`
	Priority     uint16 `json:"priority"`
	Cookie       string `json:"cookie"`
	Packets      uint64 `json:"packets"`
	Bytes        uint64 `json:"bytes"`
	DurationSec  uint32 `json:"durationSec"`
	DurationNsec uint32 `json:"durationNsec"`
	// IdleSec is set when the switch reported it.
	IdleSec *uint32 `json:"idleSec,omitempty"`
	// Flow is the flow without counters as `ovs-ofctl --no-stats dump-flows`
	// prints it (and openflow.ParseFlow reads it).
	Flow string `json:"flow"`
}

// NewFlow describes one entry of a flow stats reply.
func NewFlow(fs *openflow.FlowStats) Flow {
	f := Flow{Table: fs.Table, Priority: fs.Priority, Cookie: fmt.Sprintf("%#x", fs.Cookie),
		Packets: fs.PacketCount, Bytes: fs.ByteCount, DurationSec: fs.DurationSec, DurationNsec: fs.DurationNsec,
		Flow: fs.Flow.String()}
	if fs.HasIdle {
		idle := fs.IdleSec
		f.IdleSec = &idle
	}
	return f
}

// FlowStats is the flow stats entry f describes.
func (f Flow) FlowStats() (openflow.FlowStats, error) {
	parsed, err := openflow.ParseFlow(f.Flow)
	if err != nil {
		return openflow.FlowStats{}, fmt.Errorf("flow %q: %w", f.Flow, err)
	}
	fs := openflow.FlowStats{Flow: *parsed, DurationSec: f.DurationSec, DurationNsec: f.DurationNsec,
		PacketCount: f.Packets, ByteCount: f.Bytes}
	if f.IdleSec != nil {
		fs.IdleSec, fs.HasIdle = *f.IdleSec, true
	}
	return fs, nil
}

// FeatureGate is one gate of the agent (GET /featuregates).
type FeatureGate struct {
	Component string `json:"component"`
	Name      string `json:"name"`
	// Status is "Enabled" or "Disabled".
	Status string `json:"status"`
}

// BGPPolicyState is the BGPPolicy in effect on the node (GET /bgppolicy),
// upstream's fields.
type BGPPolicyState struct {
	BGPPolicyName           string `json:"name,omitempty"`
	RouterID                string `json:"routerID,omitempty"`
	LocalASN                int32  `json:"localASN,omitempty"`
	ListenPort              int32  `json:"listenPort,omitempty"`
	ConfederationIdentifier int32  `json:"confederationIdentifier,omitempty"`
}

// BGPPeerState is one peer of the node's BGP speaker (GET /bgppeers).
type BGPPeerState struct {
	Peer                       string `json:"peer,omitempty"`
	ASN                        int32  `json:"asn,omitempty"`
	State                      string `json:"state,omitempty"`
	GracefulRestartTimeSeconds int32  `json:"gracefulRestartTimeSeconds,omitempty"`
	MultihopTTL                int32  `json:"multihopTTL,omitempty"`
	UptimeSeconds              int64  `json:"uptimeSeconds,omitempty"`
}

// BGPRouteState is one route the node's BGP speaker advertises (GET
// /bgproutes): the prefix, its kind (EgressIP, ServiceLoadBalancerIP,
// ServiceExternalIP, ServiceClusterIP, NodeIPAMPodCIDR, as upstream) and
// the object it comes from.
type BGPRouteState struct {
	Route     string `json:"route,omitempty"`
	Type      string `json:"type,omitempty"`
	K8sObjRef string `json:"k8sObjRef,omitempty"`
}

// FQDNCacheEntry is one address the agent learned for a name of a toFQDN
// rule (GET /fqdncache), upstream's fields: the name, the address and when
// its TTL (at least fqdnCacheMinTTL) runs out. An expired address a live
// connection still uses stays until that connection ends.
type FQDNCacheEntry struct {
	FQDNName       string    `json:"fqdnName"`
	IPAddress      string    `json:"ipAddress"`
	ExpirationTime time.Time `json:"expirationTime"`
}

// PodMulticastStats is one local Pod's multicast traffic (GET
// /podmulticaststats), upstream's fields: the packets it received from its
// groups (inbound) and the multicast packets it sent (outbound).
type PodMulticastStats struct {
	PodName      string `json:"name"`
	PodNamespace string `json:"namespace"`
	Inbound      uint64 `json:"inbound"`
	Outbound     uint64 `json:"outbound"`
}
