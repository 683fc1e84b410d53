package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// Paths of the chart and of the committed manifest, from the module root.
const (
	chartDir     = "build/charts/antrea"
	manifestFile = "build/yamls/antrea.yml"
	namespace    = "kube-system"
)

func repoPath(rel string) string { return filepath.Join(apiservertest.RepoRoot(), rel) }

// helmBinary is the helm that make manifests uses ($HELM overrides it).
func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		h = repoPath("_output/tools/helm")
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("no helm at %s: run `make install` (or ./hack/install.sh helm) first", h)
	}
	return h
}

// readManifest reads the committed manifest.
func readManifest(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(repoPath(manifestFile))
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	return data
}

// run runs a command and returns its stdout and stderr.
func run(t *testing.T, stdin []byte, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = apiservertest.RepoRoot()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

// renderArgs are the arguments of helm template for the release make
// manifests renders (CRDs included), with values set by --set.
func renderArgs(sets ...string) []string {
	args := []string{"template", "antrea", repoPath(chartDir), "--namespace", namespace, "--include-crds"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// render renders the chart with values set by --set (NAME=VALUE).
func render(t *testing.T, sets ...string) []byte {
	t.Helper()
	out, errOut, err := run(t, nil, helmBinary(t), renderArgs(sets...)...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(renderArgs(sets...), " "), err, errOut)
	}
	return out
}

// objects are the decoded objects of a rendering, in order.
type objects []runtime.Object

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// decode decodes every document strictly: an unknown or misspelled field
// (mountPropogation) is an error, as it is for kubectl's validation.
func decode(t *testing.T, data []byte) objects {
	t.Helper()
	deserializer := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs objects
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding the rendered YAML: %v", err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || string(bytes.TrimSpace(raw.Raw)) == "null" {
			continue
		}
		obj, gvk, err := deserializer.Decode(raw.Raw, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", firstLine(raw.Raw), err)
		}
		if gvk.Kind == "" {
			t.Fatalf("object without a kind: %s", firstLine(raw.Raw))
		}
		objs = append(objs, obj)
	}
	return objs
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// one returns the only object of type T named name; the test fails otherwise.
func one[T runtime.Object](t *testing.T, objs objects, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if typed, ok := o.(T); ok && nameOf(o) == name {
			found = append(found, typed)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T named %q in the rendering, found %d", zero, name, len(found))
	}
	return found[0]
}

// all returns every object of type T.
func all[T runtime.Object](objs objects) []T {
	var found []T
	for _, o := range objs {
		if typed, ok := o.(T); ok {
			found = append(found, typed)
		}
	}
	return found
}

func nameOf(o runtime.Object) string {
	type named interface{ GetName() string }
	if n, ok := o.(named); ok {
		return n.GetName()
	}
	return ""
}

func kindAndName(o runtime.Object) string {
	return fmt.Sprintf("%s %s", o.GetObjectKind().GroupVersionKind().Kind, nameOf(o))
}

// The workloads of the chart.
func agentDaemonSet(t *testing.T, objs objects) *appsv1.DaemonSet {
	return one[*appsv1.DaemonSet](t, objs, "antrea-agent")
}

func controllerDeployment(t *testing.T, objs objects) *appsv1.Deployment {
	return one[*appsv1.Deployment](t, objs, "antrea-controller")
}

func configMap(t *testing.T, objs objects) *corev1.ConfigMap {
	return one[*corev1.ConfigMap](t, objs, "antrea-config")
}

// podSpecs are the Pod templates of the workloads, by workload name.
func podSpecs(t *testing.T, objs objects) map[string]*corev1.PodSpec {
	return map[string]*corev1.PodSpec{
		"DaemonSet antrea-agent":       &agentDaemonSet(t, objs).Spec.Template.Spec,
		"Deployment antrea-controller": &controllerDeployment(t, objs).Spec.Template.Spec,
	}
}

// rbacRules are the rules of every Role and ClusterRole, by role.
func rbacRules(objs objects) map[string][]rbacv1.PolicyRule {
	rules := map[string][]rbacv1.PolicyRule{}
	for _, r := range all[*rbacv1.ClusterRole](objs) {
		rules["ClusterRole "+r.Name] = r.Rules
	}
	for _, r := range all[*rbacv1.Role](objs) {
		rules["Role "+r.Namespace+"/"+r.Name] = r.Rules
	}
	return rules
}
