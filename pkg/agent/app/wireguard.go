package app

import (
	"context"
	"encoding/json"
	"fmt"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/agent/wireguard"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/util/kernelconfig"
)

// withEncryption is o as the datapath runs it: with trafficEncryptionMode
// wireGuard every peer's traffic is routed, as in noEncap (no tunnel port,
// no tunnel flows: OVS hands a remote pod's packets to the node through
// antrea-gw0), and the node's routes send it into antrea-wg0
// (pkg/agent/wireguard). Whatever trafficEncapMode said: WireGuard is the
// tunnel then, for every peer.
func withEncryption(o Options) Options {
	if o.TrafficEncryptionMode == agentconfig.EncryptionModeWireGuard && o.TrafficEncapMode != agentconfig.EncapModeNoEncap {
		klog.InfoS("trafficEncryptionMode wireGuard: pod traffic to other nodes goes through WireGuard, not an OVS tunnel", "trafficEncapMode", o.TrafficEncapMode)
		o.TrafficEncapMode = agentconfig.EncapModeNoEncap
	}
	return o
}

// encryptionOverhead is what mode adds to packets between nodes.
func encryptionOverhead(mode string) int {
	if mode == agentconfig.EncryptionModeWireGuard {
		return wireguard.Overhead
	}
	return 0
}

// setupWireGuard (trafficEncryptionMode wireGuard) reads or makes the node's
// private key, creates antrea-wg0 with the backend the kernel allows
// (wireguard.Open: the kernel module, else wireguard-go), gives it the key
// and wireGuard.port, and publishes the public key and the backend in the
// Node's annotations, from which the other agents configure this node as
// their peer. The node route controller adds the peers.
func setupWireGuard(ctx context.Context, d *deps) (component, error) {
	o := d.o
	if o.TrafficEncryptionMode != agentconfig.EncryptionModeWireGuard {
		return nil, nil
	}
	key, created, err := wireguard.LoadOrCreateKey(o.WireGuardKeyFile)
	if err != nil {
		return nil, err
	}
	dev, choice, err := wireguard.Open(wireguard.DeviceName, d.nc.PodMTU, kernelconfig.Host())
	if err != nil {
		return nil, fmt.Errorf("trafficEncryptionMode wireGuard: %w", err)
	}
	port := o.WireGuardPort
	if err := dev.Configure(wgtypes.Config{PrivateKey: &key, ListenPort: &port}); err != nil {
		_ = dev.Close()
		return nil, fmt.Errorf("trafficEncryptionMode wireGuard: %w", err)
	}
	klog.InfoS("WireGuard is up", "device", dev.Name(), "backend", choice.Backend, "why", choice.Reason,
		"port", port, "mtu", d.nc.PodMTU, "publicKey", key.PublicKey().String(), "newKey", created, "keyFile", o.WireGuardKeyFile)
	if err := publishWireGuard(ctx, d.kube, o.NodeName, key.PublicKey(), choice.Backend); err != nil {
		_ = dev.Close()
		return nil, err
	}
	d.wireGuard = dev
	return onStop(func() {
		if err := dev.Close(); err != nil {
			klog.ErrorS(err, "Closing the WireGuard device")
		}
	}), nil
}

// publishWireGuard writes the node's public key and backend into its Node's
// annotations (a merge patch: other annotations stay).
func publishWireGuard(ctx context.Context, kube kubernetes.Interface, node string, pub wgtypes.Key, backend wireguard.Backend) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		types.NodeWireGuardPublicKeyAnnotation: pub.String(),
		types.NodeWireGuardBackendAnnotation:   string(backend),
	}}})
	if err != nil {
		return err
	}
	err = retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
		_, err := kube.CoreV1().Nodes().Patch(ctx, node, apitypes.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("publish the WireGuard public key in Node %s's annotation %s: %w", node, types.NodeWireGuardPublicKeyAnnotation, err)
	}
	return nil
}
