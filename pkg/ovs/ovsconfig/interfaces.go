// Package ovsconfig is the agent's OVSDB client: it creates and deletes the
// bridges, ports and interfaces of one Open vSwitch instance through the
// Open_vSwitch database (RFC 7047) with github.com/ovn-org/libovsdb, keeps a
// monitored cache of the rows it manages, and reads back what ovs-vswitchd
// reports (OpenFlow port numbers, interface errors, the OVS version).
//
// Every port is created or deleted in one transaction (Port row, Interface
// row and the mutation of the Bridge's ports column), so a crash never leaves
// half a port behind. The client reconnects by itself when ovsdb-server
// restarts; a write issued during the outage waits for the reconnection, up
// to the caller's context deadline (or DefaultTimeout), and is never applied
// twice.
package ovsconfig

import (
	"context"
	"errors"
	"strings"
	"time"
)

// OVSDatapathType is the datapath a bridge uses: the kernel module ("system")
// on real nodes, the userspace datapath ("netdev") where the module is missing.
type OVSDatapathType string

const (
	// OVSDatapathSystem is the kernel datapath.
	OVSDatapathSystem OVSDatapathType = "system"
	// OVSDatapathNetdev is the userspace datapath.
	OVSDatapathNetdev OVSDatapathType = "netdev"
)

// TunnelType is the encapsulation of a flow-based tunnel port.
type TunnelType string

const (
	// GeneveTunnel is Geneve (UDP 6081), Antrea's default encapsulation.
	GeneveTunnel TunnelType = "geneve"
	// VXLANTunnel is VXLAN (UDP 4789).
	VXLANTunnel TunnelType = "vxlan"
	// GRETunnel is GRE (IP protocol 47) carrying Ethernet frames
	// (Transparent Ethernet Bridging), without a key.
	GRETunnel TunnelType = "gre"
)

// TunnelTypes are the encapsulations Antrea creates, its default first.
var TunnelTypes = []TunnelType{GeneveTunnel, VXLANTunnel, GRETunnel}

// Valid says whether t is one of TunnelTypes.
func (t TunnelType) Valid() bool {
	for _, v := range TunnelTypes {
		if t == v {
			return true
		}
	}
	return false
}

// TunnelTypeNames lists TunnelTypes for an error message: "geneve, vxlan or gre".
func TunnelTypeNames() string {
	names := make([]string, len(TunnelTypes))
	for i, t := range TunnelTypes {
		names[i] = string(t)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Interface types as written in the Interface table's "type" column
// (ovs-vswitchd.conf.db(5), "Interface TABLE", Core Features).
const (
	// InterfaceTypeSystem is an existing network device (a veth end, an
	// uplink); OVS spells it as the empty string.
	InterfaceTypeSystem = ""
	// InterfaceTypeInternal is a port whose network device OVS creates
	// (a tap device with the netdev datapath).
	InterfaceTypeInternal = "internal"
	// InterfaceTypeGeneve is a Geneve tunnel.
	InterfaceTypeGeneve = string(GeneveTunnel)
	// InterfaceTypeVXLAN is a VXLAN tunnel.
	InterfaceTypeVXLAN = string(VXLANTunnel)
	// InterfaceTypeGRE is a GRE tunnel.
	InterfaceTypeGRE = string(GRETunnel)
	// InterfaceTypePatch joins two bridges.
	InterfaceTypePatch = "patch"
	// InterfaceTypeERSPAN is an ERSPAN tunnel (a TrafficControl target).
	InterfaceTypeERSPAN = "erspan"
)

// DefaultTimeout bounds a call whose context has no deadline: a write waiting
// for ovsdb-server to come back, or a wait for an OpenFlow port number.
const DefaultTimeout = 10 * time.Second

// ErrNotFound is wrapped by errors about a bridge, port or interface that does
// not exist in OVSDB.
var ErrNotFound = errors.New("not found")

// PortConfig describes one port and its single interface (Antrea names both
// the same).
type PortConfig struct {
	// Name of the port and of its interface (the network device name).
	Name string
	// Type of the interface: one of the InterfaceType* constants.
	Type string
	// OFPortRequest asks ovs-vswitchd for a specific OpenFlow port number; 0
	// lets it choose.
	OFPortRequest int32
	// MAC is the Ethernet address of an internal port ("" lets OVS choose).
	MAC string
	// MTU requests an MTU for the interface (0 leaves the default).
	MTU int
	// Options go to the Interface's options column (tunnel parameters).
	Options map[string]string
	// VLAN makes the port an access port of that VLAN (the Port's tag
	// column, 1-4094): frames leave the bridge's trunk ports with the tag
	// and only frames of that VLAN reach the port. 0 leaves it untagged.
	VLAN int
	// ExternalIDs go to the Port's external_ids column: what the agent must
	// remember about the port across restarts.
	ExternalIDs map[string]string
}

// TunnelConfig describes a flow-based or point-to-point tunnel port.
type TunnelConfig struct {
	// Name of the port (e.g. antrea-tun0).
	Name string
	// Type is the encapsulation.
	Type TunnelType
	// OFPortRequest asks for a specific OpenFlow port number (0: any).
	OFPortRequest int32
	// RemoteIP is the peer's address; "" means "flow" (set per packet with
	// set_field:->tun_dst).
	RemoteIP string
	// LocalIP is the source address; "" lets OVS route.
	LocalIP string
	// Key is the VNI; "" means "flow".
	Key string
	// DestinationPort overrides the UDP port (0: the IANA default).
	DestinationPort int
	// CSum asks OVS to compute the outer UDP checksum.
	CSum bool
	// ExternalIDs go to the Port's external_ids column.
	ExternalIDs map[string]string
}

// OVSPortData is what OVSDB holds about one port of a bridge.
type OVSPortData struct {
	// UUID of the Port row.
	UUID string
	// Name of the port.
	Name string
	// IFName is the name of its (first) interface.
	IFName string
	// IFType is the interface type (InterfaceType* constants).
	IFType string
	// OFPort is the OpenFlow port number; 0 when ovs-vswitchd has not reported
	// it yet, -1 when it failed to open the interface.
	OFPort int32
	// MAC is the interface's requested MAC (mac column) or, without one, the
	// MAC in use that ovs-vswitchd reports.
	MAC string
	// Options are the interface options (tunnel parameters).
	Options map[string]string
	// VLAN is the port's tag (0: none).
	VLAN int
	// ExternalIDs are the port's external_ids.
	ExternalIDs map[string]string
	// Error is the interface's error column ("" when none).
	Error string
}

// BridgeConfig describes the bridge a client manages.
type BridgeConfig struct {
	// Name of the bridge (e.g. br-int).
	Name string
	// DatapathType selects the kernel or userspace datapath; "" means system.
	DatapathType OVSDatapathType
	// FailModeStandalone leaves the bridge acting as a learning switch when no
	// controller is connected; by default a bridge is fail_mode=secure (drop
	// until the agent installs its flows).
	FailModeStandalone bool
	// OtherConfig is merged into the bridge's other_config column (e.g.
	// hwaddr, disable-in-band).
	OtherConfig map[string]string
	// ExternalIDs are merged into the bridge's external_ids column.
	ExternalIDs map[string]string
}

// OVSBridgeClient manages one bridge of an Open vSwitch instance. Consumers
// (the CNI server, node bring-up, the route controller) depend on this
// interface so that unit tests can give them a fake; *OVSBridge implements it
// against a real ovsdb-server.
type OVSBridgeClient interface {
	// Create creates the bridge if it does not exist and otherwise makes its
	// datapath type, protocols, fail mode, other_config and external_ids
	// match the configuration. It is idempotent: an existing bridge keeps its
	// UUID.
	Create(ctx context.Context) error
	// Delete deletes the bridge and all its ports.
	Delete(ctx context.Context) error
	// GetBridgeName returns the bridge name.
	GetBridgeName() string
	// GetDatapathType returns the bridge's datapath type.
	GetDatapathType() OVSDatapathType
	// GetBridgeUUID returns the UUID of the bridge row (ErrNotFound if absent).
	GetBridgeUUID(ctx context.Context) (string, error)
	// CreatePort attaches an existing network device (a veth end, an uplink)
	// and returns the Port UUID.
	CreatePort(ctx context.Context, name string, externalIDs map[string]string) (string, error)
	// CreateInternalPort creates an internal port with an optional MAC and
	// OpenFlow port request and returns the Port UUID.
	CreateInternalPort(ctx context.Context, name string, ofPortRequest int32, mac string, externalIDs map[string]string) (string, error)
	// CreateTunnelPort creates a tunnel port and returns the Port UUID.
	CreateTunnelPort(ctx context.Context, cfg TunnelConfig) (string, error)
	// CreatePortWithConfig creates a port of any supported type and returns
	// the Port UUID; the other Create*Port calls are shorthands for it.
	CreatePortWithConfig(ctx context.Context, cfg PortConfig) (string, error)
	// DeletePort deletes a port (by Port UUID) with its interfaces.
	DeletePort(ctx context.Context, portUUID string) error
	// DeletePorts deletes several ports in one transaction.
	DeletePorts(ctx context.Context, portUUIDs []string) error
	// GetOFPort waits (bounded by ctx or DefaultTimeout) until ovs-vswitchd
	// reports the OpenFlow port number of an interface, and returns it; an
	// interface that failed to open is answered with its error column.
	GetOFPort(ctx context.Context, ifName string) (int32, error)
	// GetPortData returns one port by name (ErrNotFound if absent).
	GetPortData(ctx context.Context, name string) (*OVSPortData, error)
	// GetPortList returns every port of the bridge with its external_ids.
	GetPortList(ctx context.Context) ([]OVSPortData, error)
	// SetPortExternalIDs replaces a port's external_ids.
	SetPortExternalIDs(ctx context.Context, portName string, externalIDs map[string]string) error
	// SetInterfaceOptions replaces an interface's options.
	SetInterfaceOptions(ctx context.Context, ifName string, options map[string]string) error
	// SetInterfaceMTU sets an interface's mtu_request.
	SetInterfaceMTU(ctx context.Context, ifName string, mtu int) error
	// SetInterfaceMAC sets an interface's mac column (internal ports).
	SetInterfaceMAC(ctx context.Context, ifName string, mac string) error
	// GetOVSVersion returns ovs_version from the Open_vSwitch table.
	GetOVSVersion(ctx context.Context) (string, error)
	// GetExternalIDs returns the bridge's external_ids.
	GetExternalIDs(ctx context.Context) (map[string]string, error)
	// SetExternalIDs merges keys into the bridge's external_ids.
	SetExternalIDs(ctx context.Context, externalIDs map[string]string) error
}
