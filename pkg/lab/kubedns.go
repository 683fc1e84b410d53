package lab

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"text/template"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Cluster DNS: on real nodes the lab runs CoreDNS as kube-dns, as kubeadm
// does, so that pods resolve Service and pod names (kubelet's clusterDNS is
// ClusterDNS, the kube-dns Service's ClusterIP, which AntreaProxy realizes).

// CoreDNSImage is the CoreDNS image the lab builds (hack/install.sh
// build_coredns: the same version, from the Go module proxy).
const CoreDNSImage = "registry.k8s.io/coredns/coredns:v1.15.0"

// GlibcDNSTestingImage is what upstream's DNS conformance specs query with
// besides agnhost: a glibc Debian with dig and the coredns binary (its
// Dockerfile in k8s.io/kubernetes test/images/glibc-dns-testing).
const GlibcDNSTestingImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"

const (
	kubeDNSDeployment = "coredns"
	kubeDNSService    = "kube-dns"
)

//go:embed addons/coredns.yaml
var coreDNSManifest string

// KubeDNSManifest is the kube-dns addon with the lab's image and Service IP
// (of an IPv4 or a dual-stack lab).
func KubeDNSManifest() ([]byte, error) {
	return kubeDNSManifest(ClusterDNS, OutsideIP().String())
}

// kubeDNSManifest is the kube-dns addon whose Service has clusterIP and
// whose CoreDNS forwards OutsideZone to outsideIP.
func kubeDNSManifest(clusterIP, outsideIP string) ([]byte, error) {
	t, err := template.New("coredns.yaml").Option("missingkey=error").Parse(coreDNSManifest)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, map[string]string{"Image": CoreDNSImage, "ClusterIP": clusterIP, "OutsideZone": OutsideZone, "OutsideIP": outsideIP})
	return b.Bytes(), err
}

// installKubeDNS applies the kube-dns addon and waits until every CoreDNS
// replica is available, i.e. answers its readiness probe (the kubernetes
// plugin has synced with the API server).
func (s *supervisor) installKubeDNS(ctx context.Context) error {
	manifest, err := kubeDNSManifest(s.opts.clusterDNS(), s.opts.outsideDNSIP().String())
	if err != nil {
		return err
	}
	return s.applyAddon(ctx, "cluster DNS", "coredns.yaml", manifest, func() (bool, string) {
		d, err := s.client.AppsV1().Deployments(AntreaNamespace).Get(ctx, kubeDNSDeployment, metav1.GetOptions{})
		switch {
		case err != nil:
			return false, err.Error()
		case d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation &&
			d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas:
			return true, fmt.Sprintf("kube-dns %s, %d CoreDNS replicas", s.opts.clusterDNS(), *d.Spec.Replicas)
		}
		return false, fmt.Sprintf("%d of %d CoreDNS replicas available (kubectl -n kube-system describe pods -l k8s-app=kube-dns)", d.Status.AvailableReplicas, d.Status.Replicas)
	})
}

// applyAddon writes manifest to the lab directory as file, applies it with
// kubectl and polls ready until it says so, logging each new status.
func (s *supervisor) applyAddon(ctx context.Context, what, file string, manifest []byte, ready func() (bool, string)) error {
	path := filepath.Join(s.opts.Dir, file)
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return err
	}
	applied := time.Now()
	if out, err := s.opts.kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w\n%s", path, err, out)
	}
	var last string
	for {
		ok, msg := ready()
		if ok {
			s.logf("%s ready %.1fs after kubectl apply: %s", what, time.Since(applied).Seconds(), msg)
			return nil
		}
		if msg != last {
			klog.InfoS("Waiting for an addon", "addon", what, "status", msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (%s): %w", what, last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// outsideDNSIP is where the outside host's DNS server listens: its IPv6
// address in an IPv6-only lab (CoreDNS, an IPv6-only pod, forwards there).
func (o Options) outsideDNSIP() netip.Addr {
	if o.ipv6Only() {
		return underlayV6(OutsideIP())
	}
	return OutsideIP()
}
