package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The web UI is off by default (the manifest does not name it), and
// ui.enable=true adds exactly its Deployment, Service, ServiceAccount and
// RBAC, strictly decodable, the Pod running as its own ServiceAccount, not
// as root, and its roles granting no write but Traceflow creation and
// deletion, its own Secret and TokenReviews (the token login).
func TestUIEnableAddsTheUIAndOnlyIt(t *testing.T) {
	off := decode(t, render(t))
	on := decode(t, render(t, "ui.enable=true"))
	name := func(o runtime.Object) string {
		switch v := o.(type) {
		case *appsv1.Deployment:
			return "Deployment/" + v.Name
		case *corev1.Service:
			return "Service/" + v.Name
		case *corev1.ServiceAccount:
			return "ServiceAccount/" + v.Name
		case *rbacv1.ClusterRole:
			return "ClusterRole/" + v.Name
		case *rbacv1.ClusterRoleBinding:
			return "ClusterRoleBinding/" + v.Name
		case *rbacv1.Role:
			return "Role/" + v.Name
		case *rbacv1.RoleBinding:
			return "RoleBinding/" + v.Name
		}
		return ""
	}
	for _, o := range off {
		if n := name(o); n != "" && n[len(n)-len("antrea-ui"):] == "antrea-ui" {
			t.Errorf("the default render holds %s", n)
		}
	}
	if len(on)-len(off) != 7 {
		t.Errorf("ui.enable=true adds %d objects, want 7 (Deployment, Service, ServiceAccount, ClusterRole(Binding), Role(Binding))", len(on)-len(off))
	}
	writes := map[string]bool{}
	for _, o := range on {
		switch v := o.(type) {
		case *appsv1.Deployment:
			if v.Name != "antrea-ui" {
				continue
			}
			spec := v.Spec.Template.Spec
			if spec.ServiceAccountName != "antrea-ui" || spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil ||
				!*spec.SecurityContext.RunAsNonRoot || spec.HostNetwork {
				t.Errorf("antrea-ui Pod spec %+v: want its own ServiceAccount, non-root, no host network", spec)
			}
		case *rbacv1.ClusterRole:
			if v.Name == "antrea-ui" {
				for _, r := range v.Rules {
					for _, verb := range r.Verbs {
						if verb != "get" && verb != "list" {
							for _, res := range r.Resources {
								writes[res+":"+verb] = true
							}
						}
					}
				}
			}
		case *rbacv1.Role:
			if v.Name == "antrea-ui" {
				for _, r := range v.Rules {
					for _, verb := range r.Verbs {
						if verb != "get" && verb != "list" {
							for _, res := range r.Resources {
								writes[res+":"+verb] = true
							}
						}
					}
				}
			}
		}
	}
	// tokenreviews:create has kube-apiserver check a token pasted at login;
	// it reveals who a token is, and changes nothing.
	want := map[string]bool{"traceflows:create": true, "traceflows:delete": true, "secrets:update": true, "secrets:create": true,
		"tokenreviews:create": true}
	for w := range writes {
		if !want[w] {
			t.Errorf("the antrea-ui roles grant %s", w)
		}
	}
	for w := range want {
		if !writes[w] {
			t.Errorf("the antrea-ui roles lack %s", w)
		}
	}
}

// build/yamls/antrea-ui.yml (`antrea-lab up --ui`, kubectl apply after
// antrea.yml) is what make manifests renders: the chart's UI objects alone.
func TestUIManifestIsFreshAndHoldsOnlyTheUI(t *testing.T) {
	dir := t.TempDir()
	_, errOut, err := run(t, nil, repoPath("hack/manifests.sh"), filepath.Join(dir, "antrea.yml"), filepath.Join(dir, "fa.yml"), filepath.Join(dir, "ui.yml"))
	if err != nil {
		t.Fatalf("hack/manifests.sh: %v\n%s", err, errOut)
	}
	want, err := os.ReadFile(filepath.Join(dir, "ui.yml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(repoPath("build/yamls/antrea-ui.yml"))
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("build/yamls/antrea-ui.yml is stale: run `make manifests` and commit it")
	}
	objs := decode(t, got)
	if len(objs) != 7 {
		t.Errorf("antrea-ui.yml holds %d objects, want the UI's 7", len(objs))
	}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && d.Spec.Template.Spec.Containers[0].Image != "docker.io/antrea/antrea-ui:latest" {
			t.Errorf("image %s, want docker.io/antrea/antrea-ui:latest (the lab builds it)", d.Spec.Template.Spec.Containers[0].Image)
		}
	}
}
