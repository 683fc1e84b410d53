package lab

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The kube-dns addon decodes strictly into the API's types, its Service
// holds the address kubelet gives pods as their nameserver, and its
// Deployment runs the image the lab builds.
func TestKubeDNSAddonServesTheClusterDNSAddressWithTheLabsCoreDNSImage(t *testing.T) {
	data, err := KubeDNSManifest()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var svc corev1.Service
	var dep appsv1.Deployment
	var cm corev1.ConfigMap
	r := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
			continue
		}
		kinds[meta.Kind]++
		var into any
		switch meta.Kind {
		case "Service":
			into = &svc
		case "Deployment":
			into = &dep
		case "ConfigMap":
			into = &cm
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service"} {
		if kinds[k] != 1 {
			t.Errorf("%d objects of kind %s, want 1", kinds[k], k)
		}
	}
	if svc.Name != "kube-dns" || svc.Namespace != "kube-system" || svc.Spec.ClusterIP != ClusterDNS {
		t.Errorf("Service %s/%s clusterIP %s, want kube-system/kube-dns %s (kubelet's clusterDNS)", svc.Namespace, svc.Name, svc.Spec.ClusterIP, ClusterDNS)
	}
	protos := map[corev1.Protocol]int32{}
	for _, p := range svc.Spec.Ports {
		if p.Port == 53 {
			protos[p.Protocol] = p.Port
		}
	}
	if len(protos) != 2 {
		t.Errorf("kube-dns ports %v, want 53 over UDP and TCP", svc.Spec.Ports)
	}
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != CoreDNSImage {
		t.Errorf("CoreDNS image %s, want %s", got, CoreDNSImage)
	}
	if svc.Spec.Selector["k8s-app"] != dep.Spec.Template.Labels["k8s-app"] {
		t.Errorf("the Service selects %v, the pods are labelled %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	if !strings.Contains(cm.Data["Corefile"], "kubernetes cluster.local") {
		t.Errorf("the Corefile serves no cluster.local zone:\n%s", cm.Data["Corefile"])
	}
}

// The image's tag is the version hack/install.sh builds.
func TestCoreDNSImageTagIsTheBuiltVersion(t *testing.T) {
	bin := filepath.Join("..", "..", "_output", "bin", "coredns")
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version (hack/install.sh coredns builds it): %v\n%s", bin, err, out)
	}
	tag := CoreDNSImage[strings.LastIndex(CoreDNSImage, ":")+2:]
	if !strings.Contains(string(out), "CoreDNS-"+tag) {
		t.Errorf("%s says %q, the image is tagged %s", bin, out, CoreDNSImage)
	}
	// The binary has the plugins the Corefile names.
	plugins, err := exec.Command(bin, "-plugins").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Fields(string(plugins)) {
		have[l] = true
	}
	data, _ := KubeDNSManifest()
	for _, p := range []string{"errors", "health", "ready", "kubernetes", "prometheus", "cache", "reload", "loadbalance"} {
		if !bytes.Contains(data, []byte("        "+p)) {
			t.Errorf("the Corefile does not use %s", p)
		}
		if !have[p] {
			t.Errorf("coredns was built without the %s plugin the Corefile uses:\n%s", p, plugins)
		}
	}
}
