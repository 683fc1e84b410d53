package lab

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Proxy selects what realizes Services on the lab's real nodes.
type Proxy string

const (
	// ProxyAntrea is AntreaProxy, in the agent (the default).
	ProxyAntrea Proxy = "antrea"
	// ProxyKube is upstream's kube-proxy v1.37.2 in nftables mode, as a
	// DaemonSet, with AntreaProxy disabled: what users would otherwise run,
	// so that Service figures are measured side by side in one lab.
	ProxyKube Proxy = "kube-proxy"
)

// KubeProxyImage is the kube-proxy image the lab builds: the kube-proxy
// binary of hack/install.sh on the antrea-agent image's Debian rootfs, which
// has the nft, iptables and conntrack tools kube-proxy runs (upstream bases
// its image on distroless-iptables for the same tools).
const KubeProxyImage = "registry.k8s.io/kube-proxy:v1.37.2"

const kubeProxyDaemonSet = "kube-proxy"

//go:embed addons/kube-proxy.yaml
var kubeProxyManifest string

// KubeProxyManifest is the kube-proxy addon with the lab's image, API server
// and pod CIDR.
func KubeProxyManifest() ([]byte, error) {
	t, err := template.New("kube-proxy.yaml").Option("missingkey=error").Parse(kubeProxyManifest)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]string{
		"Image":       KubeProxyImage,
		"APIServer":   fmt.Sprintf("https://%s:%d", controlPlaneIP(), APIServerPort),
		"ClusterCIDR": ClusterCIDR,
	})
	return b.Bytes(), err
}

// installKubeProxy applies the kube-proxy addon and waits until it runs on
// every node.
func (s *supervisor) installKubeProxy(ctx context.Context, nodes int) error {
	manifest, err := KubeProxyManifest()
	if err != nil {
		return err
	}
	return s.applyAddon(ctx, "kube-proxy (nftables)", "kube-proxy.yaml", manifest, func() (bool, string) {
		ds, err := s.client.AppsV1().DaemonSets(AntreaNamespace).Get(ctx, kubeProxyDaemonSet, metav1.GetOptions{})
		switch {
		case err != nil:
			return false, err.Error()
		case ds.Status.ObservedGeneration >= ds.Generation && int(ds.Status.NumberReady) == nodes:
			return true, fmt.Sprintf("on %d nodes", nodes)
		}
		return false, fmt.Sprintf("kube-proxy ready on %d of %d nodes", ds.Status.NumberReady, nodes)
	})
}
