package manifest

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// kubectl runs the kubectl of the envtest assets against a control plane.
type kubectl struct {
	t          *testing.T
	path       string
	kubeconfig string
}

func newKubectl(t *testing.T, cp *apiservertest.ControlPlane) *kubectl {
	t.Helper()
	path := filepath.Join(cp.Assets, "kubectl")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no kubectl in %s: run `make install`", cp.Assets)
	}
	return &kubectl{t: t, path: path, kubeconfig: cp.Kubeconfig}
}

// with returns a kubectl that reports to t (a subtest).
func (k *kubectl) with(t *testing.T) *kubectl {
	c := *k
	c.t = t
	return &c
}

// run runs kubectl with stdin (if not nil) and fails the test on an error.
func (k *kubectl) run(stdin []byte, args ...string) (stdout, stderr string) {
	k.t.Helper()
	out, errOut, err := run(k.t, stdin, k.path, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return string(out), string(errOut)
}

// TestKubeAPIServerAcceptsTheManifest applies the manifest to a real
// kube-apiserver: `kubectl apply --dry-run=server` of the committed manifest
// and of renderings with other values (the server validates every field,
// strictly); then for real, as a user installs and upgrades: a second apply
// changes nothing, the caBundle antrea-controller writes survives the apply
// of a new configuration, and `kubectl delete -f` removes everything.
func TestKubeAPIServerAcceptsTheManifest(t *testing.T) {
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitForNamespace(t, ctx, cp, namespace)
	manifest := readManifest(t)

	t.Run("server dry run of the committed manifest", func(t *testing.T) {
		k := k.with(t)
		out, errOut := k.run(nil, "apply", "--dry-run=server", "-f", repoPath(manifestFile))
		checkDryRun(t, out, errOut, len(decode(t, manifest)))
	})
	for _, sets := range valueCombinations[1:] {
		t.Run("server dry run with "+strings.Join(sets, ","), func(t *testing.T) {
			k := k.with(t)
			rendered := render(t, sets...)
			out, errOut := k.run(rendered, "apply", "--dry-run=server", "-f", "-")
			checkDryRun(t, out, errOut, len(decode(t, rendered)))
		})
	}

	t.Run("install, re-apply, upgrade the configuration, delete", func(t *testing.T) {
		k := k.with(t)
		k.run(nil, "apply", "-f", repoPath(manifestFile))
		out, _ := k.run(nil, "apply", "-f", repoPath(manifestFile))
		for _, line := range nonEmptyLines(out) {
			if !strings.HasSuffix(line, " unchanged") {
				t.Errorf("a second apply of the same manifest changed something: %s", line)
			}
		}

		// What antrea-controller does once it serves.
		ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nnot checked by the API server\n-----END CERTIFICATE-----\n"))
		k.run(nil, "patch", "apiservice", "v1beta2.controlplane.antrea.io", "--type=merge", "-p", `{"spec":{"caBundle":"`+ca+`"}}`)
		checksum := func() string {
			out, _ := k.run(nil, "-n", namespace, "get", "daemonset", "antrea-agent",
				"-o", `jsonpath={.spec.template.metadata.annotations.checksum/config}`)
			return out
		}
		before := checksum()

		k.run(render(t, "tunnelType=vxlan"), "apply", "-f", "-")
		if got, _ := k.run(nil, "get", "apiservice", "v1beta2.controlplane.antrea.io", "-o", "jsonpath={.spec.caBundle}"); got != ca {
			t.Errorf("applying a new configuration dropped the caBundle antrea-controller wrote: got %q", got)
		}
		if after := checksum(); after == before {
			t.Errorf("applying a new configuration left the agent Pods' checksum/config as it was (%s): they would not restart", after)
		}
		conf, _ := k.run(nil, "-n", namespace, "get", "configmap", "antrea-config", "-o", `jsonpath={.data.antrea-agent\.conf}`)
		if !strings.Contains(conf, `tunnelType: "vxlan"`) {
			t.Errorf("the applied antrea-agent.conf does not say vxlan:\n%s", conf)
		}

		k.run(nil, "delete", "-f", repoPath(manifestFile), "--wait=false")
		// A CRD goes once kube-apiserver has removed its objects, which may
		// take a while on a busy machine: one that is being deleted (it has a
		// deletionTimestamp) counts as gone.
		var left []string
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			out, _ := k.run(nil, "get", "-f", repoPath(manifestFile), "--ignore-not-found", "-o",
				`jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}`)
			left = nil
			for _, line := range nonEmptyLines(out) {
				if len(strings.Fields(line)) == 1 {
					left = append(left, line)
				}
			}
			return len(left) == 0, nil
		})
		if len(left) > 0 {
			t.Errorf("kubectl delete -f %s left:\n%s", manifestFile, strings.Join(left, "\n"))
		}
	})
}

// checkDryRun: every object was accepted, without a warning (deprecated
// API, unknown field, ...).
func checkDryRun(t *testing.T, stdout, stderr string, objects int) {
	t.Helper()
	lines := nonEmptyLines(stdout)
	for _, line := range lines {
		if !strings.HasSuffix(line, "(server dry run)") {
			t.Errorf("unexpected output of the dry run: %s", line)
		}
	}
	if len(lines) != objects {
		t.Errorf("the dry run reported %d objects, want %d:\n%s", len(lines), objects, stdout)
	}
	if strings.Contains(stderr, "Warning") {
		t.Errorf("the API server warned:\n%s", stderr)
	}
}

func nonEmptyLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitForNamespace waits until kube-apiserver has made a system namespace.
func waitForNamespace(t *testing.T, ctx context.Context, cp *apiservertest.ControlPlane, name string) {
	t.Helper()
	client := kubernetes.NewForConfigOrDie(cp.Config)
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s never appeared: %v", name, err)
	}
}
