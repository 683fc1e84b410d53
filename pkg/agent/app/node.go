package app

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodeinit"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// setupOVSDB connects to ovsdb-server (waiting for it). The connection
// closes once every part set up after this one stopped.
func setupOVSDB(ctx context.Context, d *deps) (component, error) {
	ovsdb, err := connectOVSDB(ctx, "unix:"+filepath.Join(d.o.OVSRunDir, "db.sock"))
	if err != nil {
		return nil, err
	}
	d.ovsdb = ovsdb
	return onStop(ovsdb.Close), nil
}

// setupNode brings the node's OVS up: it releases a restarted OVS and puts
// the node's addresses back on br-phy (prepareNodeNetwork) before it needs
// the API server, waits for the Node's pod CIDR, finds the transport
// interface, and creates or checks the bridges, the gateway, the tunnel and
// the underlay (pkg/agent/nodeinit).
func setupNode(ctx context.Context, d *deps) (component, error) {
	o := d.o
	if err := prepareNodeNetwork(ctx, d.ovsdb, o.OVSRunDir, nodeinit.DefaultUplinkBridgeName); err != nil {
		return nil, err
	}
	policyOnly := o.TrafficEncapMode == agentconfig.EncapModeNetworkPolicyOnly
	// networkPolicyOnly: the primary CNI allocates pod addresses, maybe
	// from no Node CIDR at all (EKS, AKS): Antrea needs none.
	node, podCIDRs, err := waitForNode(ctx, d.kube, o.NodeName, !policyOnly)
	if err != nil {
		return nil, err
	}
	uplink, nodeIP := o.UplinkName, net.IP(nil)
	if uplink == "" {
		if uplink, nodeIP, err = findTransportInterface(ctx, node, d.ovsdb); err != nil {
			return nil, err
		}
		klog.InfoS("Found the transport interface", "node", o.NodeName, "interface", uplink, "nodeIP", nodeIP)
	}
	nc, err := nodeinit.Bringup(ctx, nodeinit.Config{
		NodeName:     o.NodeName,
		Conn:         d.ovsdb,
		OVSRunDir:    o.OVSRunDir,
		DatapathType: ovsconfig.OVSDatapathType(o.DatapathType),
		TunnelType:   ovsconfig.TunnelType(o.TunnelType),
		TunnelCSum:   o.TunnelCsum,
		NoTunnel:     o.TrafficEncapMode == agentconfig.EncapModeNoEncap || o.TrafficEncapMode == agentconfig.EncapModeNetworkPolicyOnly,
		// networkPolicyOnly: the primary CNI's traffic between nodes goes
		// through the node's kernel; the uplink stays as it is.
		NoUnderlayBridge: policyOnly,
		GatewayHasNodeIP: policyOnly,
		// WireGuard's overhead (the datapath is noEncap's: see wireguard.go).
		EncryptionOverhead: encryptionOverhead(o.TrafficEncryptionMode),
		NodeIP:             nodeIP,
		PodCIDRs:           podCIDRs,
		UplinkName:         uplink,
		MTU:                o.MTU,
		BridgeName:         o.OVSBridge,
		GatewayName:        o.HostGateway,
	})
	if err != nil {
		return nil, fmt.Errorf("bring up node %s: %w", o.NodeName, err)
	}
	d.node, d.podCIDRs, d.nodeIP, d.nc = node, podCIDRs, nodeIP, nc
	d.bridge = ovsconfig.NewOVSBridge(d.ovsdb, ovsconfig.BridgeConfig{Name: nc.BridgeName, DatapathType: nc.DatapathType})
	return nil, nil
}

// waitForNode waits until the Node exists and, with needCIDR, has a pod
// CIDR (kube-controller-manager allocates it after the node registers).
func waitForNode(ctx context.Context, c kubernetes.Interface, name string, needCIDR bool) (*corev1.Node, []*net.IPNet, error) {
	var node *corev1.Node
	var cidrs []*net.IPNet
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			klog.InfoS("Waiting for Node", "node", name, "err", err)
			return false, nil
		}
		if !needCIDR {
			node = n
			return true, nil
		}
		specs := n.Spec.PodCIDRs
		if len(specs) == 0 && n.Spec.PodCIDR != "" {
			specs = []string{n.Spec.PodCIDR}
		}
		if len(specs) == 0 {
			klog.InfoS("Waiting for the Node's pod CIDR", "node", name)
			return false, nil
		}
		cidrs = cidrs[:0]
		for _, s := range specs {
			_, c, err := net.ParseCIDR(s)
			if err != nil {
				return false, fmt.Errorf("node %s: podCIDR %q: %w", name, s, err)
			}
			cidrs = append(cidrs, c)
		}
		node = n
		return true, nil
	})
	return node, cidrs, err
}
