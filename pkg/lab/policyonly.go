package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// TrafficModeNetworkPolicyOnly is upstream's trafficEncapMode for Antrea
// chained after another CNI.
const TrafficModeNetworkPolicyOnly = "networkPolicyOnly"

// PrimaryCNIConfName is the primary CNI's conflist the lab writes on each
// node with --traffic-mode networkPolicyOnly; Antrea's install-cni chains
// its plugin after it in 05-antrea.conflist.
const PrimaryCNIConfName = "10-ptp.conflist"

// With --traffic-mode networkPolicyOnly the lab plays what a cloud gives a
// cluster before Antrea comes (EKS, AKS, GKE): a primary CNI on every node
// that owns pod networking, here the reference ptp plugin with host-local
// IPAM on the node's pod CIDR (as kubenet-style clouds allocate from
// Node.spec.podCIDR), and a network that routes every pod address to its
// node, here a route to each node's pod CIDR via its address in every netns
// of the underlay (nodes, control plane, outside host), as a VPC route
// table does. Antrea is then installed from its manifest in policy-only
// mode and enforces policy on the pods' traffic without routing it.

// primaryCNIConf is the ptp conflist of a node with pod CIDR cidr.
func primaryCNIConf(cidr string, mtu int) (string, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "lab-ptp",
		"plugins": []any{map[string]any{
			"type": "ptp",
			// The network routes pod addresses (installPrimaryCNI): no SNAT.
			"ipMasq": false,
			"mtu":    mtu,
			"ipam": map[string]any{
				"type":   "host-local",
				"ranges": []any{[]any{map[string]any{"subnet": cidr}}},
				"routes": []any{map[string]any{"dst": "0.0.0.0/0"}},
			},
		}},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b) + "\n", err
}

// installPrimaryCNI waits for each node's pod CIDR, writes the node's
// primary CNI conflist and routes every node's pod CIDR via its address in
// every netns of the underlay.
func (s *supervisor) installPrimaryCNI(ctx context.Context, nodes []NodeInfo) error {
	cidrs := map[string]string{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(cidrs) < len(nodes) {
		list, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, n := range list.Items {
				if n.Spec.PodCIDR != "" {
					cidrs[n.Name] = n.Spec.PodCIDR
				}
			}
		}
		if len(cidrs) == len(nodes) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the primary CNI needs each node's pod CIDR: %d of %d nodes have one after 2m", len(cidrs), len(nodes))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	for _, n := range nodes {
		cidr, ok := cidrs[n.Name]
		if !ok {
			return fmt.Errorf("node %s has no pod CIDR", n.Name)
		}
		conf, err := primaryCNIConf(cidr, 1500)
		if err != nil {
			return err
		}
		path := filepath.Join(s.opts.NodeHostPath(n.Name, "/etc/cni/net.d"), PrimaryCNIConfName)
		if err := writeFile(path, conf); err != nil {
			return err
		}
		klog.InfoS("Primary CNI of the node", "node", n.Name, "conflist", path, "podCIDR", cidr)
	}
	// The network's routes to the pods (a cloud's route table): each
	// netns of the underlay reaches a node's pods via the node.
	netnss := []string{ControlPlaneNetNS, OutsideNetNS}
	for _, n := range nodes {
		netnss = append(netnss, n.NetNS)
	}
	for _, n := range nodes {
		for _, ns := range netnss {
			if ns == n.NetNS {
				continue
			}
			if err := run(ctx, "ip", "-n", ns, "route", "replace", cidrs[n.Name], "via", n.IP); err != nil {
				return fmt.Errorf("route node %s's pods (%s) in %s: %w", n.Name, cidrs[n.Name], ns, err)
			}
		}
	}
	return nil
}
