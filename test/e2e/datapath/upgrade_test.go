package datapath

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/lab/images"
	"antrea.io/antrea/test/labtest"
)

// ensureB1OnlyFromA1 makes (once) the NetworkPolicy that lets only a1 reach
// b1 on TCP 80 and waits until it is enforced: a2 refused, a1 let through.
func (e *env) ensureB1OnlyFromA1(t *testing.T, ctx context.Context) {
	t.Helper()
	e.ensureOnlyFrom(t, ctx, "b1", "a1", "a2")
}

// ensureOnlyFrom makes (once) the NetworkPolicy target-only-from-from that
// lets only pod from reach pod target on TCP 80 (target isolated for
// ingress) and waits until it is enforced: other refused, from let through.
func (e *env) ensureOnlyFrom(t *testing.T, ctx context.Context, target, from, other string) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: target + "-only-from-" + from, Namespace: namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": target}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": from}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(80))}},
			}},
		},
	}
	if _, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	labtest.WaitFor(t, ctx, "policy "+np.Name+" to be enforced", func() error {
		if err := e.probe(ctx, other, "tcp", e.ip(target)); err == nil {
			return fmt.Errorf("%s still reaches %s", other, target)
		}
		return e.probe(ctx, from, "tcp", e.ip(target))
	})
}

// upgradeTag is the tag of the "next version" of Antrea's images.
const upgradeTag = "e2e-upgrade"

// upgradeWindow bounds the stream and the probes that run while Antrea is
// upgraded; the rollout must finish inside it.
const upgradeWindow = 100 * time.Second

// antreaImage matches the images of Antrea's manifest at tag latest.
var antreaImage = regexp.MustCompile(`(image: "?[^"\s]*antrea/antrea-(agent|controller)):latest`)

// testUpgrade applies the manifest of a new version (new image tags, new
// image digests) while a TCP stream runs from a1 (node-1) to the iperf pod
// (node-2) and NetworkPolicy lets only a1 reach b1: the DaemonSet and the
// Deployment roll, the stream survives, and a2's probe of b1, one every 10 ms
// for the whole upgrade, never connects.
func (e *env) testUpgrade(t *testing.T, ctx context.Context) {
	e.ensureB1OnlyFromA1(t, ctx)
	// The next version: the same programs in images with new digests.
	store, err := images.NewStore(lab.ImageStoreDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"docker.io/antrea/antrea-agent", "docker.io/antrea/antrea-controller"} {
		img, err := store.Image(repo + ":latest")
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cfg := cf.Config.DeepCopy()
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		cfg.Labels["org.opencontainers.image.version"] = upgradeTag
		next, err := mutate.Config(img, *cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put([]string{repo + ":" + upgradeTag}, next); err != nil {
			t.Fatal(err)
		}
		name := repo + ":" + upgradeTag
		t.Cleanup(func() {
			if err := store.Remove(name); err != nil {
				t.Errorf("remove %s from the image store: %v", name, err)
			}
		})
	}
	applied, err := os.ReadFile(e.Opts.AppliedManifest())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(antreaImage.FindAll(applied, -1)); n < 2 {
		t.Fatalf("the applied manifest names %d Antrea images at tag latest, want the agent's and the controller's", n)
	}
	next := antreaImage.ReplaceAll(applied, []byte("${1}:"+upgradeTag))
	nextPath := filepath.Join(t.TempDir(), "antrea-next.yml")
	if err := os.WriteFile(nextPath, next, 0o644); err != nil {
		t.Fatal(err)
	}

	// While the stream and the probes run: kubectl apply, then the rollout.
	secs := strconv.Itoa(int(upgradeWindow.Seconds()))
	stream := e.background(ctx, "a1", "iperf3", "-c", e.ip("iperf"), "-t", secs, "-i", "5", "-b", "20M")
	forbidden := e.background(ctx, "a2", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "10ms", "--for", secs+"s")
	allowed := e.background(ctx, "a1", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "100ms", "--for", secs+"s")
	time.Sleep(3 * time.Second)
	start := time.Now()
	if out, stderr, err := e.Kubectl(ctx, "apply", "-f", nextPath); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s%s", nextPath, err, out, stderr)
	}
	for _, w := range []string{"daemonset/" + lab.AgentDaemonSet, "deployment/" + lab.ControllerDeployment} {
		if out, stderr, err := e.Kubectl(ctx, "-n", lab.AntreaNamespace, "rollout", "status", w, "--timeout=90s"); err != nil {
			t.Fatalf("kubectl rollout status %s: %v\n%s%s", w, err, out, stderr)
		}
	}
	rollout := time.Since(start)
	t.Logf("upgrade: kubectl apply to both rollouts complete in %.1fs", rollout.Seconds())
	if rollout > upgradeWindow-10*time.Second {
		t.Fatalf("the rollout took %v, longer than the stream and probes run (%v)", rollout, upgradeWindow)
	}
	for _, n := range e.Nodes {
		out, stderr, err := e.Kubectl(ctx, "-n", lab.AntreaNamespace, "get", "pods", "-l", "component=antrea-agent",
			"--field-selector", "spec.nodeName="+n, "-o", "jsonpath={.items[*].spec.containers[*].image}")
		if err != nil || !strings.Contains(out, upgradeTag) || strings.Contains(out, ":latest") {
			t.Errorf("%s: the agent pod runs %q after the upgrade: %v %s", n, out, err, stderr)
		}
	}

	streamOut, streamErr := stream.wait()
	if streamErr != nil {
		t.Errorf("the TCP stream broke during the upgrade: %v\n%s", streamErr, streamOut)
	} else {
		t.Logf("the TCP stream across the upgrade:\n%s", lastLines(streamOut, 8))
	}
	checkPolicyProbes(t, "during the upgrade", forbidden, allowed)
	if err := e.probeEventually(ctx, "a1", "tcp", e.ip("b1")); err != nil {
		t.Errorf("after the upgrade: %v", err)
	}
	if err := e.probe(ctx, "a2", "tcp", e.ip("b1")); err == nil {
		t.Errorf("after the upgrade a2 reaches b1 against the policy")
	}
}

// bgCmd is a command run in a pod's netns by `antrea-lab exec` in the background.
type bgCmd struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

func (e *env) background(ctx context.Context, pod string, argv ...string) *bgCmd {
	cmd := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antrea-lab"),
		append(append(labtest.Flags(e.Opts), "exec", "-n", namespace, pod, "--"), argv...)...)
	b := &bgCmd{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		b.done <- err
		return b
	}
	go func() { b.done <- cmd.Wait() }()
	return b
}

func (b *bgCmd) wait() (string, error) {
	err := <-b.done
	return b.out.String(), err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func ptr[T any](v T) *T { return &v }

// checkPolicyProbes waits for the two probe loops of a disruption (during:
// "during the upgrade") and fails if the forbidden client (a2 -> b1) ever
// connected or made no attempt, or the allowed one (a1 -> b1) never
// connected.
func checkPolicyProbes(t *testing.T, during string, forbidden, allowed *bgCmd) {
	t.Helper()
	fOut, fErr := forbidden.wait()
	aOut, aErr := allowed.wait()
	if fErr != nil || aErr != nil {
		t.Fatalf("probes: forbidden %v: %s; allowed %v: %s", fErr, fOut, aErr, aOut)
	}
	t.Logf("%s: forbidden a2->b1: %s", during, strings.TrimSpace(fOut))
	t.Logf("%s: allowed a1->b1: %s", during, strings.TrimSpace(aOut))
	if !strings.Contains(fOut, "connected=0 ") || strings.Contains(fOut, "attempts=0 ") {
		t.Errorf("a forbidden connection went through %s (policy bypassed): %s", during, fOut)
	}
	if strings.Contains(aOut, "connected=0 ") {
		t.Errorf("the allowed client never connected %s: %s", during, aOut)
	}
}
