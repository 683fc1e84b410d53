package cniserver

import (
	"context"
	"net"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// OVSPortClient is what the CNIServer needs of the OVSDB client; it is the
// subset of ovsconfig.OVSBridgeClient that deals with pod ports, so
// *ovsconfig.OVSBridge satisfies it as is.
type OVSPortClient interface {
	// CreatePort attaches an existing network device and returns the Port UUID.
	CreatePort(ctx context.Context, name string, externalIDs map[string]string) (string, error)
	// DeletePort deletes a port by Port UUID.
	DeletePort(ctx context.Context, portUUID string) error
	// GetOFPort waits, bounded, for the OpenFlow port number of an interface.
	GetOFPort(ctx context.Context, ifName string) (int32, error)
	// GetPortData returns one port by name (wrapping ovsconfig.ErrNotFound if absent).
	GetPortData(ctx context.Context, name string) (*ovsconfig.OVSPortData, error)
	// GetPortList returns every port of the bridge with its external_ids.
	GetPortList(ctx context.Context) ([]ovsconfig.OVSPortData, error)
}

var _ OVSPortClient = (*ovsconfig.OVSBridge)(nil)

// PodFlowInstaller installs and removes the OpenFlow entries of one pod
// (implemented by the agent's openflow client). ifName is the host-side
// interface name, which is also the OVS port name.
//
// UninstallPodFlows must be idempotent: DEL calls it for pods whose flows were
// never installed (an ADD rolled back early, a DEL repeated).
//
// PodFlowsInstalled is what CHECK asks; it must not wait for other flow
// writes (the agent's client keeps pod flows under their own lock).
type PodFlowInstaller interface {
	InstallPodFlows(ifName string, podIPs []net.IP, podMAC net.HardwareAddr, ofPort uint32) error
	UninstallPodFlows(ifName string) error
	PodFlowsInstalled(ifName string) bool
}
