package cniserver

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/cni"
)

// Defaults of Config.
const (
	// DefaultNetworkName names the CNI network (and the IPAM store directory).
	DefaultNetworkName = "antrea"
	// DefaultIPAMDataDir is where host-local reservations are kept.
	DefaultIPAMDataDir = "/var/lib/antrea/ipam"
	// DefaultReadyTimeout bounds how long ADD waits for the agent to be ready
	// before answering "try again later" (the runtime retries).
	DefaultReadyTimeout = 30 * time.Second
	// DefaultOVSDBTimeout bounds an ADD's wait for ovsdb-server: long enough
	// for a restart of it, well inside the runtime's own CNI timeout.
	DefaultOVSDBTimeout = 30 * time.Second
	// DefaultMTU is the pod MTU when none is configured: a 1500-byte underlay
	// minus the Geneve overhead Antrea reserves (50 bytes).
	DefaultMTU = 1450
	// ConfListName is the file WriteConfList writes; "10-" sorts it first.
	ConfListName = cni.OwnConfListName
	// PluginType is the "type" of the plugin in the conflist: the binary name
	// the runtime looks up in its CNI path is "antrea".
	PluginType = "antrea"
	// ConfListCNIVersion is the cniVersion of the written conflist.
	ConfListCNIVersion = "1.1.0"
)

// Config is the node-level configuration of the CNIServer.
type Config struct {
	// SocketPath is the unix socket the gRPC CNI API is served on
	// (cni.DefaultAgentSocket when empty).
	SocketPath string
	// NodeName is the node this agent runs on (logs, errors).
	NodeName string
	// PodCIDRs are the node's pod CIDRs (from its Node object), at most one
	// per IP family. The first address of each is the gateway (antrea-gw0).
	PodCIDRs []*net.IPNet
	// MTU of the pod interfaces (DefaultMTU when zero).
	MTU int
	// DNS is put in every CNI result unless the network configuration has its own.
	DNS types.DNS
	// IPAMDataDir holds the host-local reservations (DefaultIPAMDataDir when empty).
	IPAMDataDir string
	// NetworkName names the CNI network (DefaultNetworkName when empty).
	NetworkName string
	// ReadyTimeout bounds ADD's wait for readiness (DefaultReadyTimeout when zero).
	ReadyTimeout time.Duration
	// OVSDBTimeout bounds how long one ADD waits for ovsdb-server (through a
	// restart, say) before it fails with an OVS port error naming the
	// endpoint (DefaultOVSDBTimeout when zero).
	OVSDBTimeout time.Duration
	// HostNetNS is the path of the network namespace where host-side veth
	// ends go, which must be where ovs-vswitchd runs; empty means the agent's
	// own namespace (the normal case: the agent runs in the node's netns).
	HostNetNS string
	// Chained (trafficEncapMode networkPolicyOnly): Antrea runs after a
	// primary CNI that made the pod's interface and addresses; ADD takes
	// the host end of the primary's veth into br-int and the node's route
	// to the pod onto the gateway (chained.go) and allocates nothing.
	Chained bool
	// GatewayName is antrea-gw0, where Chained moves the routes to pods.
	GatewayName string
}

func (c *Config) setDefaults() {
	if c.SocketPath == "" {
		c.SocketPath = cni.DefaultAgentSocket
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	if c.IPAMDataDir == "" {
		c.IPAMDataDir = DefaultIPAMDataDir
	}
	if c.NetworkName == "" {
		c.NetworkName = DefaultNetworkName
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.OVSDBTimeout == 0 {
		c.OVSDBTimeout = DefaultOVSDBTimeout
	}
}

// confList is the on-disk form of a CNI network configuration list.
type confList struct {
	CNIVersion string           `json:"cniVersion"`
	Name       string           `json:"name"`
	Plugins    []map[string]any `json:"plugins"`
}

// ConfList returns the node's CNI network configuration list.
func (s *Server) ConfList() ([]byte, error) {
	plugin := map[string]any{
		"type": PluginType,
		// The agent does the IPAM itself; the section documents it for
		// readers of the file and for tools that expect one.
		"ipam": map[string]any{"type": "host-local"},
		// The runtime passes pods' hostPorts (runtimeConfig.portMappings);
		// the agent installs them (pkg/agent/nodenet), as upstream's
		// chained portmap plugin would.
		"capabilities": map[string]any{"portMappings": true},
	}
	if s.cfg.SocketPath != cni.DefaultAgentSocket {
		plugin["agentSocket"] = s.cfg.SocketPath
	}
	if len(s.cfg.DNS.Nameservers) > 0 || len(s.cfg.DNS.Search) > 0 || s.cfg.DNS.Domain != "" {
		plugin["dns"] = s.cfg.DNS
	}
	return json.MarshalIndent(confList{
		CNIVersion: ConfListCNIVersion,
		Name:       s.cfg.NetworkName,
		Plugins:    []map[string]any{plugin},
	}, "", "  ")
}

// WriteConfList writes ConfListName into dir (the runtime's CNI config
// directory, e.g. /etc/cni/net.d) atomically, so that a runtime reading the
// directory never sees half a file. Chained, it writes
// cni.ChainedConfListName instead: the primary's configuration found there
// with Antrea's plugin after its own.
func (s *Server) WriteConfList(dir string) error {
	data, err := s.ConfList()
	if err != nil {
		return fmt.Errorf("encode the CNI conflist: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create CNI config directory %s: %w", dir, err)
	}
	if s.cfg.Chained {
		var own confList
		if err := json.Unmarshal(data, &own); err != nil {
			return err
		}
		primary, err := cni.WriteChained(dir, own.Plugins[0], 0)
		if err != nil {
			return fmt.Errorf("chain Antrea after the primary CNI in %s: %w", dir, err)
		}
		klog.InfoS("Chained Antrea's CNI plugin after the primary's", "primary", primary, "conflist", filepath.Join(dir, cni.ChainedConfListName))
		return nil
	}
	dst := filepath.Join(dir, ConfListName)
	if err := cni.WriteFileAtomic(dst, append(data, '\n')); err != nil {
		return fmt.Errorf("install CNI conflist %s: %w", dst, err)
	}
	return nil
}
