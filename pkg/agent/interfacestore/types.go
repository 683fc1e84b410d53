// Package interfacestore is the agent's node-local cache of the interfaces it
// manages on br-int: pod (container) interfaces, the gateway, tunnel ports and
// the uplink. One InterfaceConfig type describes all four; the store answers
// "which interface is this?" from whatever key a code path holds (name,
// container ID, OpenFlow port, IP, pod). What must survive an agent restart is
// written to the OVS port's external_ids (see externalids.go) and read back by
// Initialize at start.
package interfacestore

import (
	"net"
	"slices"

	"antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// InterfaceType says what an interface is for.
type InterfaceType uint8

const (
	// ContainerInterface is the host end of a pod's veth pair.
	ContainerInterface InterfaceType = iota + 1
	// GatewayInterface is the node's gateway to pods (antrea-gw0).
	GatewayInterface
	// TunnelInterface is a tunnel port (antrea-tun0, flow-based).
	TunnelInterface
	// UplinkInterface is the node's physical (underlay) interface.
	UplinkInterface
	// TrafficControlInterface is a target or return port TrafficControl
	// made or attached (pkg/agent/trafficcontrol): recorded on its port so
	// that a restarted agent finds it, kept out of the store.
	TrafficControlInterface
)

// String returns the name used in external_ids and logs.
func (t InterfaceType) String() string {
	switch t {
	case ContainerInterface:
		return "container"
	case GatewayInterface:
		return "gateway"
	case TunnelInterface:
		return "tunnel"
	case UplinkInterface:
		return "uplink"
	case TrafficControlInterface:
		return "traffic-control"
	}
	return "unknown"
}

// parseInterfaceType is the inverse of String; ok is false for unknown names.
func parseInterfaceType(s string) (InterfaceType, bool) {
	for _, t := range []InterfaceType{ContainerInterface, GatewayInterface, TunnelInterface, UplinkInterface, TrafficControlInterface} {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

// OVSPortConfig ties an interface to its OVS port.
type OVSPortConfig struct {
	// PortUUID is the UUID of the Port row.
	PortUUID string
	// OFPort is the OpenFlow port number.
	OFPort int32
}

// ContainerInterfaceConfig is what a pod interface adds.
type ContainerInterfaceConfig struct {
	// ContainerID is the sandbox (infra container) ID the runtime gave CNI.
	ContainerID string
	// PodName is the pod's name.
	PodName string
	// PodNamespace is the pod's namespace.
	PodNamespace string
	// IFDev is the interface name inside the pod (CNI_IFNAME, e.g. eth0).
	IFDev string
	// PortMappings are the pod's hostPorts (the CNI's
	// runtimeConfig.portMappings), installed in the node's netfilter.
	PortMappings []types.PortMapping
}

// TunnelInterfaceConfig is what a tunnel port adds.
type TunnelInterfaceConfig struct {
	// Type is the encapsulation.
	Type ovsconfig.TunnelType
	// RemoteIP is the fixed peer address; nil for a flow-based tunnel.
	RemoteIP net.IP
	// LocalIP is the fixed source address; nil lets OVS route.
	LocalIP net.IP
	// DestinationPort is the UDP port; 0 means the default.
	DestinationPort int32
	// CSum says whether the outer UDP checksum is computed.
	CSum bool
}

// InterfaceConfig is one interface the agent manages. Exactly one of the
// optional parts besides OVSPortConfig is set, matching Type (none for the
// gateway and the uplink).
type InterfaceConfig struct {
	// Type says what the interface is for.
	Type InterfaceType
	// InterfaceName is unique on the node and is also the OVS port name.
	InterfaceName string
	// IPs are the interface's addresses (the pod's IPs, the gateway's IP).
	IPs []net.IP
	// MAC is the interface's MAC (inside the pod, for a container interface).
	MAC net.HardwareAddr
	// VLANID is the VLAN of the interface (0: none).
	VLANID uint16
	*OVSPortConfig
	*ContainerInterfaceConfig
	*TunnelInterfaceConfig
}

// InterfaceStore is the agent's interface cache. Implementations are safe for
// concurrent use; returned values are copies the caller may keep.
type InterfaceStore interface {
	// Initialize replaces the content with interfaces (built from OVSDB at start).
	Initialize(interfaces []*InterfaceConfig)
	// AddInterface adds or replaces the interface with the same name.
	AddInterface(cfg *InterfaceConfig)
	// DeleteInterface removes the interface with cfg's name.
	DeleteInterface(cfg *InterfaceConfig)
	// GetInterfaceByName returns the interface named name.
	GetInterfaceByName(name string) (*InterfaceConfig, bool)
	// GetContainerInterface returns the (first) interface of a container.
	GetContainerInterface(containerID string) (*InterfaceConfig, bool)
	// GetContainerInterfacesByPod returns the interfaces of pod namespace/name.
	GetContainerInterfacesByPod(podName, podNamespace string) []*InterfaceConfig
	// GetInterfaceByIP returns the interface holding ip.
	GetInterfaceByIP(ip string) (*InterfaceConfig, bool)
	// GetInterfaceByOFPort returns the interface on OpenFlow port ofPort.
	GetInterfaceByOFPort(ofPort int32) (*InterfaceConfig, bool)
	// GetInterfacesByType returns the interfaces of one type, sorted by name.
	GetInterfacesByType(t InterfaceType) []*InterfaceConfig
	// GetContainerInterfaceNum returns how many pod interfaces are stored.
	GetContainerInterfaceNum() int
	// Len returns how many interfaces are stored.
	Len() int
	// ListInterfaces returns every interface, sorted by name.
	ListInterfaces() []*InterfaceConfig
}

// NewContainerInterface describes a pod interface.
func NewContainerInterface(name, containerID, podName, podNamespace, ifDev string, mac net.HardwareAddr, ips []net.IP, vlanID uint16) *InterfaceConfig {
	return &InterfaceConfig{
		Type:          ContainerInterface,
		InterfaceName: name,
		IPs:           ips,
		MAC:           mac,
		VLANID:        vlanID,
		ContainerInterfaceConfig: &ContainerInterfaceConfig{
			ContainerID: containerID, PodName: podName, PodNamespace: podNamespace, IFDev: ifDev,
		},
	}
}

// NewGatewayInterface describes the node's gateway.
func NewGatewayInterface(name string, mac net.HardwareAddr, ips []net.IP) *InterfaceConfig {
	return &InterfaceConfig{Type: GatewayInterface, InterfaceName: name, MAC: mac, IPs: ips}
}

// NewTunnelInterface describes a tunnel port; remoteIP nil means flow-based.
func NewTunnelInterface(name string, tunnelType ovsconfig.TunnelType, remoteIP net.IP, csum bool) *InterfaceConfig {
	return &InterfaceConfig{
		Type:                  TunnelInterface,
		InterfaceName:         name,
		TunnelInterfaceConfig: &TunnelInterfaceConfig{Type: tunnelType, RemoteIP: remoteIP, CSum: csum},
	}
}

// NewUplinkInterface describes the node's uplink.
func NewUplinkInterface(name string, mac net.HardwareAddr, ips []net.IP) *InterfaceConfig {
	return &InterfaceConfig{Type: UplinkInterface, InterfaceName: name, MAC: mac, IPs: ips}
}

// DeepCopy returns a copy sharing nothing with cfg.
func (cfg *InterfaceConfig) DeepCopy() *InterfaceConfig {
	if cfg == nil {
		return nil
	}
	out := *cfg
	if cfg.IPs != nil {
		out.IPs = make([]net.IP, len(cfg.IPs))
		for i, ip := range cfg.IPs {
			out.IPs[i] = append(net.IP(nil), ip...)
		}
	}
	if cfg.MAC != nil {
		out.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	}
	if cfg.OVSPortConfig != nil {
		c := *cfg.OVSPortConfig
		out.OVSPortConfig = &c
	}
	if cfg.ContainerInterfaceConfig != nil {
		c := *cfg.ContainerInterfaceConfig
		c.PortMappings = slices.Clone(c.PortMappings)
		out.ContainerInterfaceConfig = &c
	}
	if cfg.TunnelInterfaceConfig != nil {
		c := *cfg.TunnelInterfaceConfig
		c.RemoteIP = append(net.IP(nil), c.RemoteIP...)
		c.LocalIP = append(net.IP(nil), c.LocalIP...)
		if cfg.TunnelInterfaceConfig.RemoteIP == nil {
			c.RemoteIP = nil
		}
		if cfg.TunnelInterfaceConfig.LocalIP == nil {
			c.LocalIP = nil
		}
		out.TunnelInterfaceConfig = &c
	}
	return &out
}

// PodEvent says that a pod's container interface was recorded in the store
// (after its port and flows exist) or removed from it. The CNI server
// publishes one per ADD and DEL; the policy controller realizes the pod's
// policies for (or without) its port.
type PodEvent struct {
	PodNamespace, PodName, ContainerID string
	// Deleted is set when the interface was removed.
	Deleted bool
}
