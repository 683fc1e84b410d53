package cniserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/types"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
)

// HostPortInstaller realizes pods' hostPorts on the node (implemented by
// nodenet.HostPorts). key names one attachment (container ID and
// interface); Delete of an unknown key is no error. Add returns a
// *nodenet.ConflictError for a port another attachment holds. Installed
// is what CHECK compares with the recorded mappings.
type HostPortInstaller interface {
	Add(ctx context.Context, key string, p nodenet.PodHostPorts) error
	Delete(ctx context.Context, key string) error
	Installed(key string) []types.PortMapping
}

// portMapEntry is one entry of runtimeConfig.portMappings, the CNI
// convention of the "portMappings" capability (CONVENTIONS.md of the CNI
// spec; the portmap plugin reads the same).
type portMapEntry struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// runtimeConfig is the part of the network configuration the runtime fills
// in for the capabilities the conflist declares.
type runtimeConfig struct {
	PortMappings []portMapEntry `json:"portMappings,omitempty"`
}

// parsePortMappings validates runtimeConfig.portMappings; an error names
// the entry and the field at fault. Identical entries (a runtime listing a
// port twice) count once.
func parsePortMappings(entries []portMapEntry) ([]types.PortMapping, error) {
	var out []types.PortMapping
	bad := func(i int, field string, format string, args ...any) error {
		return newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil, "runtimeConfig.portMappings[%d].%s: %s", i, field, fmt.Sprintf(format, args...))
	}
	for i, e := range entries {
		m := types.PortMapping{}
		if e.HostPort < 1 || e.HostPort > 65535 {
			return nil, bad(i, "hostPort", "%d is not a port (1-65535)", e.HostPort)
		}
		if e.ContainerPort < 1 || e.ContainerPort > 65535 {
			return nil, bad(i, "containerPort", "%d is not a port (1-65535)", e.ContainerPort)
		}
		m.HostPort, m.ContainerPort = uint16(e.HostPort), uint16(e.ContainerPort)
		switch strings.ToLower(e.Protocol) {
		case "", "tcp": // the convention's default
			m.Protocol = types.ProtocolTCP
		case "udp":
			m.Protocol = types.ProtocolUDP
		default:
			return nil, bad(i, "protocol", "%q is not supported (tcp, udp)", e.Protocol)
		}
		if e.HostIP != "" {
			ip, err := netip.ParseAddr(e.HostIP)
			if err != nil || ip.Zone() != "" {
				return nil, bad(i, "hostIP", "%q is not an IP address", e.HostIP)
			}
			ip = ip.Unmap()
			switch {
			case ip.IsUnspecified(): // 0.0.0.0 or ::: every address
			case ip.IsMulticast():
				return nil, bad(i, "hostIP", "%s is a multicast address", ip)
			default:
				m.HostIP = ip
			}
		}
		dup := false
		for j, o := range out {
			if o == m {
				dup = true
				break
			}
			if o.Overlaps(m) {
				return nil, bad(i, "hostPort", "%s conflicts with runtimeConfig.portMappings[%d] (%s)", m, j, o)
			}
		}
		if !dup {
			out = append(out, m)
		}
	}
	return out, nil
}

// hostPortKey names one attachment to the HostPortInstaller.
func hostPortKey(containerID, ifName string) string { return containerID + "/" + ifName }

// HostPortKey is the key under which the server installs an interface's
// hostPorts (the agent restores them under the same).
func HostPortKey(cfg *interfacestore.InterfaceConfig) string {
	return hostPortKey(cfg.ContainerID, cfg.IFDev)
}

// PodHostPorts is what the installer needs of an interface.
func PodHostPorts(cfg *interfacestore.InterfaceConfig) nodenet.PodHostPorts {
	p := nodenet.PodHostPorts{Pod: cfg.PodNamespace + "/" + cfg.PodName, Mappings: cfg.PortMappings}
	for _, ip := range cfg.IPs {
		if a, ok := netip.AddrFromSlice(ip); ok {
			p.IPs = append(p.IPs, a.Unmap())
		}
	}
	return p
}

// installHostPorts realizes an ADD's hostPorts; a mapping whose family the
// pod has no address of, or that another pod holds, is refused naming the
// entry of runtimeConfig.portMappings.
func (s *Server) installHostPorts(ctx context.Context, r *request, cfg *interfacestore.InterfaceConfig) error {
	if len(cfg.PortMappings) == 0 {
		return nil
	}
	if s.hostPorts == nil {
		return newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil,
			"runtimeConfig.portMappings: antrea-agent on node %s cannot install hostPorts (see its log: nftables unavailable)", s.cfg.NodeName)
	}
	p := PodHostPorts(cfg)
	for i, m := range p.Mappings {
		if m.HostIP.IsValid() && !hasFamily(cfg.IPs, types.FamilyOf(m.HostIP)) {
			return newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil,
				"runtimeConfig.portMappings[%d].hostIP: %s has no address of its family on %s (%v)", i, m.HostIP, r, cfg.IPs)
		}
	}
	err := s.hostPorts.Add(ctx, hostPortKey(cfg.ContainerID, cfg.IFDev), p)
	var ce *nodenet.ConflictError
	if errors.As(err, &ce) {
		return newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil, "runtimeConfig.portMappings[%d].hostPort: %v", ce.Index, ce)
	}
	if err != nil {
		return newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "install the hostPorts of %s", r)
	}
	return nil
}

// hostPortProblems says what CHECK finds missing of an interface's
// hostPorts.
func (s *Server) hostPortProblems(cfg *interfacestore.InterfaceConfig) []string {
	if len(cfg.PortMappings) == 0 {
		return nil
	}
	if s.hostPorts == nil {
		return []string{"hostPorts recorded but this agent cannot install them"}
	}
	if got := s.hostPorts.Installed(HostPortKey(cfg)); !slices.Equal(got, cfg.PortMappings) {
		return []string{fmt.Sprintf("hostPorts installed %v, recorded %v", got, cfg.PortMappings)}
	}
	return nil
}

// hasFamily reports whether one of ips is of family f.
func hasFamily(ips []net.IP, f types.IPFamily) bool {
	return slices.ContainsFunc(ips, func(ip net.IP) bool { return types.FamilyOfIP(ip) == f })
}
