package interfacestore

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// Keys of the OVS Port external_ids through which an InterfaceConfig survives
// an agent restart. This file is the only place that writes or reads them.
const (
	ExternalIDType         = "antrea-type"
	ExternalIDContainerID  = "container-id"
	ExternalIDPodName      = "pod-name"
	ExternalIDPodNamespace = "pod-namespace"
	ExternalIDIFDev        = "if-dev"
	ExternalIDIP           = "ip-address"
	ExternalIDMAC          = "attached-mac"
	ExternalIDVLANID       = "vlan-id"
	// ExternalIDPortMappings holds a pod's hostPorts as JSON, in the CNI's
	// runtimeConfig.portMappings form.
	ExternalIDPortMappings = "port-mappings"
)

// portMapping is the stored form of a types.PortMapping (the CNI's).
type portMapping struct {
	HostPort      uint16 `json:"hostPort"`
	ContainerPort uint16 `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

func encodePortMappings(ms []types.PortMapping) string {
	out := make([]portMapping, 0, len(ms))
	for _, m := range ms {
		p := portMapping{HostPort: m.HostPort, ContainerPort: m.ContainerPort, Protocol: types.ProtocolName(m.Protocol)}
		if m.HostIP.IsValid() {
			p.HostIP = m.HostIP.String()
		}
		out = append(out, p)
	}
	b, _ := json.Marshal(out) // plain fields: cannot fail
	return string(b)
}

func decodePortMappings(s string) ([]types.PortMapping, error) {
	var in []portMapping
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, err
	}
	out := make([]types.PortMapping, 0, len(in))
	for _, p := range in {
		m := types.PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort}
		switch p.Protocol {
		case "tcp":
			m.Protocol = types.ProtocolTCP
		case "udp":
			m.Protocol = types.ProtocolUDP
		default:
			return nil, fmt.Errorf("protocol %q", p.Protocol)
		}
		if p.HostIP != "" {
			ip, err := netip.ParseAddr(p.HostIP)
			if err != nil {
				return nil, err
			}
			m.HostIP = ip
		}
		out = append(out, m)
	}
	return out, nil
}

// BuildOVSPortExternalIDs returns the external_ids that record cfg on its OVS port.
func BuildOVSPortExternalIDs(cfg *InterfaceConfig) map[string]string {
	ids := map[string]string{ExternalIDType: cfg.Type.String()}
	if len(cfg.IPs) > 0 {
		ips := make([]string, 0, len(cfg.IPs))
		for _, ip := range cfg.IPs {
			ips = append(ips, ip.String())
		}
		ids[ExternalIDIP] = strings.Join(ips, ",")
	}
	if len(cfg.MAC) > 0 {
		ids[ExternalIDMAC] = cfg.MAC.String()
	}
	if cfg.VLANID != 0 {
		ids[ExternalIDVLANID] = strconv.Itoa(int(cfg.VLANID))
	}
	if c := cfg.ContainerInterfaceConfig; c != nil {
		ids[ExternalIDContainerID] = c.ContainerID
		ids[ExternalIDPodName] = c.PodName
		ids[ExternalIDPodNamespace] = c.PodNamespace
		if c.IFDev != "" {
			ids[ExternalIDIFDev] = c.IFDev
		}
		if len(c.PortMappings) > 0 {
			ids[ExternalIDPortMappings] = encodePortMappings(c.PortMappings)
		}
	}
	return ids
}

// InterfaceConfigFromOVSPort rebuilds an InterfaceConfig from a port's
// external_ids and interface columns. It returns nil, nil for a port the agent
// does not manage (a bridge's local port, a port someone else added).
func InterfaceConfigFromOVSPort(port ovsconfig.OVSPortData) (*InterfaceConfig, error) {
	ids := port.ExternalIDs
	typeName, ok := ids[ExternalIDType]
	var t InterfaceType
	switch {
	case ok:
		if t, ok = parseInterfaceType(typeName); !ok {
			return nil, fmt.Errorf("port %s: bad %s %q", port.Name, ExternalIDType, typeName)
		}
	case ovsconfig.TunnelType(port.IFType).Valid():
		// A tunnel is fully described by its interface columns.
		t = TunnelInterface
	default:
		return nil, nil
	}
	if t == TrafficControlInterface {
		return nil, nil // the TrafficControl controller's, found by it
	}
	cfg := &InterfaceConfig{
		Type:          t,
		InterfaceName: port.Name,
		OVSPortConfig: &OVSPortConfig{PortUUID: port.UUID, OFPort: port.OFPort},
	}
	if s := ids[ExternalIDIP]; s != "" {
		for _, part := range strings.Split(s, ",") {
			ip := net.ParseIP(part)
			if ip == nil {
				return nil, fmt.Errorf("port %s: bad IP %q in %s", port.Name, part, ExternalIDIP)
			}
			cfg.IPs = append(cfg.IPs, ip)
		}
	}
	if s := ids[ExternalIDMAC]; s != "" {
		mac, err := net.ParseMAC(s)
		if err != nil {
			return nil, fmt.Errorf("port %s: bad %s %q: %w", port.Name, ExternalIDMAC, s, err)
		}
		cfg.MAC = mac
	}
	if s := ids[ExternalIDVLANID]; s != "" {
		v, err := strconv.ParseUint(s, 10, 12)
		if err != nil {
			return nil, fmt.Errorf("port %s: bad %s %q: %w", port.Name, ExternalIDVLANID, s, err)
		}
		cfg.VLANID = uint16(v)
	}
	switch t {
	case ContainerInterface:
		cfg.ContainerInterfaceConfig = &ContainerInterfaceConfig{
			ContainerID:  ids[ExternalIDContainerID],
			PodName:      ids[ExternalIDPodName],
			PodNamespace: ids[ExternalIDPodNamespace],
			IFDev:        ids[ExternalIDIFDev],
		}
		if s := ids[ExternalIDPortMappings]; s != "" {
			ms, err := decodePortMappings(s)
			if err != nil {
				return nil, fmt.Errorf("port %s: bad %s %q: %w", port.Name, ExternalIDPortMappings, s, err)
			}
			cfg.PortMappings = ms
		}
	case TunnelInterface:
		tc := &TunnelInterfaceConfig{Type: ovsconfig.TunnelType(port.IFType)}
		if ip := net.ParseIP(port.Options["remote_ip"]); ip != nil {
			tc.RemoteIP = ip
		}
		if ip := net.ParseIP(port.Options["local_ip"]); ip != nil {
			tc.LocalIP = ip
		}
		if p, err := strconv.Atoi(port.Options["dst_port"]); err == nil {
			tc.DestinationPort = int32(p)
		}
		tc.CSum = port.Options["csum"] == "true"
		cfg.TunnelInterfaceConfig = tc
	}
	return cfg, nil
}

// InterfaceConfigsFromOVSPorts rebuilds the configs of every managed port;
// a port whose external_ids cannot be parsed is logged and skipped so one bad
// row does not stop the agent.
func InterfaceConfigsFromOVSPorts(ports []ovsconfig.OVSPortData) []*InterfaceConfig {
	var out []*InterfaceConfig
	for _, p := range ports {
		cfg, err := InterfaceConfigFromOVSPort(p)
		if err != nil {
			klog.ErrorS(err, "Skipping OVS port with unreadable external_ids", "port", p.Name)
			continue
		}
		if cfg != nil {
			out = append(out, cfg)
		}
	}
	return out
}
