package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/test/labtest"
)

// envNative set to 1 runs the package with Antrea-native policies present
// that do not change what the tested traffic may do (issue 14: K8s
// NetworkPolicy stays equal to cyclonus and kube-network-policies with
// Antrea-native policies present). They are installed once before the
// first test and removed after the last, so every case's matrix is still
// judged by the K8s-only oracles.
const envNative = "ANTREA_CONFORMANCE_NATIVE"

// nativeNamespace holds a pod that a baseline policy isolates; no case
// probes it.
const nativeNamespace = "conformance-native-other"

// nativePolicies are, by upstream Antrea's documented semantics, without
// effect on traffic between the pods of the managed namespaces (x, y, z and
// those a case creates), whatever the K8s NetworkPolicies:
//   - a securityops Pass of every pod's ingress and egress from and to every
//     Namespace: Pass skips the later Antrea tiers and hands the decision to
//     K8s NetworkPolicy, then the baseline tier, which has nothing for these
//     pods (below);
//   - an Allow in a custom Tier for pods labelled conformance-unrelated=true
//     (no pod is): an Allow of a selected pod would override K8s NetworkPolicy;
//   - application-tier Drops of TEST-NET addresses (RFC 5737), by a
//     ClusterGroup of ipBlocks and inline, which no tested connection uses,
//     and an Antrea NetworkPolicy in x dropping TEST-NET-3 on TCP 81;
//   - a baseline Drop of everything to and from the pod of another Namespace.
//
// The Pass comes first in its tier and the others never match, so the
// suite's oracles, which see only the K8s NetworkPolicies, stay right.
const nativePolicies = `
apiVersion: crd.antrea.io/v1beta1
kind: Tier
metadata: {name: conformance-extra}
spec: {priority: 120, description: "conformance: Antrea-native policies present"}
---
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: conformance-pass-all}
spec:
  tier: securityops
  priority: 5
  appliedTo:
  - namespaceSelector: {}
  ingress:
  - action: Pass
    from:
    - namespaceSelector: {}
  egress:
  - action: Pass
    to:
    - namespaceSelector: {}
---
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: conformance-allow-unrelated}
spec:
  tier: conformance-extra
  priority: 1
  appliedTo:
  - podSelector: {matchLabels: {conformance-unrelated: "true"}}
    namespaceSelector: {}
  ingress:
  - action: Allow
    from:
    - namespaceSelector: {}
---
apiVersion: crd.antrea.io/v1beta1
kind: ClusterGroup
metadata: {name: conformance-testnet}
spec:
  ipBlocks: [{cidr: 192.0.2.0/24}, {cidr: 198.51.100.0/24}]
---
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: conformance-drop-testnet}
spec:
  priority: 10
  appliedTo:
  - namespaceSelector: {}
  ingress:
  - action: Drop
    from:
    - group: conformance-testnet
  egress:
  - action: Drop
    to:
    - ipBlock: {cidr: 198.51.100.0/24}
  - action: Reject
    ports: [{protocol: TCP, port: 80}]
    to:
    - group: conformance-testnet
---
apiVersion: crd.antrea.io/v1beta1
kind: NetworkPolicy
metadata: {name: conformance-annp, namespace: x}
spec:
  priority: 10
  appliedTo:
  - podSelector: {}
  ingress:
  - action: Drop
    ports: [{protocol: TCP, port: 81}]
    from:
    - ipBlock: {cidr: 203.0.113.0/24}
---
apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: conformance-baseline-other}
spec:
  tier: baseline
  priority: 1
  appliedTo:
  - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ` + nativeNamespace + `}}
  ingress:
  - action: Drop
    from:
    - namespaceSelector: {}
  egress:
  - action: Drop
    to:
    - namespaceSelector: {}
`

// nativeACNPs are the ClusterNetworkPolicies above, awaited Realized.
var nativeACNPs = []string{"conformance-pass-all", "conformance-allow-unrelated", "conformance-drop-testnet", "conformance-baseline-other"}

// installNative creates the other Namespace and its pod, applies the
// policies and waits until every one is Realized on its nodes.
func installNative(ctx context.Context, e *labEnv) error {
	c := newCluster(e)
	if err := c.ensureNamespace(ctx, "x", map[string]string{"ns": "x"}); err != nil {
		return err
	}
	if err := c.ensureNamespace(ctx, nativeNamespace, nil); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "isolated", Namespace: nativeNamespace, Labels: map[string]string{"pod": "isolated"}},
		Spec: corev1.PodSpec{
			NodeName:                      e.Nodes[0],
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{labtest.TestPodContainer("server", []int{80, 81}, []int{80, 81})},
		},
	}
	if _, err := e.Client.CoreV1().Pods(nativeNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/isolated: %w", nativeNamespace, err)
	}
	file := filepath.Join(os.TempDir(), fmt.Sprintf("conformance-native-%d.yaml", os.Getpid()))
	if err := os.WriteFile(file, []byte(nativePolicies), 0o644); err != nil {
		return err
	}
	defer os.Remove(file)
	if stdout, stderr, err := e.Kubectl(ctx, "apply", "-f", file); err != nil {
		return fmt.Errorf("kubectl apply the Antrea-native policies: %v\n%s%s", err, stdout, stderr)
	}
	return labtest.Poll(ctx, "the Antrea-native policies Realized", func() error {
		for _, name := range nativeACNPs {
			stdout, stderr, err := e.Kubectl(ctx, "get", "acnp", name, "-o", "jsonpath={.status.phase}")
			if err != nil {
				return fmt.Errorf("%s: %v: %s", name, err, stderr)
			}
			if stdout != "Realized" {
				return fmt.Errorf("acnp %s is %q", name, stdout)
			}
		}
		stdout, stderr, err := e.Kubectl(ctx, "get", "annp", "-n", "x", "conformance-annp", "-o", "jsonpath={.status.phase}")
		if err != nil || stdout != "Realized" {
			return fmt.Errorf("annp x/conformance-annp is %q (%v %s)", stdout, err, stderr)
		}
		return nil
	})
}

// removeNative deletes what installNative made.
func removeNative(e *labEnv) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []string
	for _, args := range [][]string{
		append([]string{"delete", "acnp", "--ignore-not-found"}, nativeACNPs...),
		{"delete", "annp", "-n", "x", "conformance-annp", "--ignore-not-found"},
		{"delete", "clustergroup", "conformance-testnet", "--ignore-not-found"},
		{"delete", "namespace", nativeNamespace, "--ignore-not-found", "--wait=false"},
	} {
		if _, stderr, err := e.Kubectl(ctx, args...); err != nil {
			errs = append(errs, fmt.Sprintf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr))
		}
	}
	// The Tier goes once the controller has seen its policy go.
	if err := labtest.Poll(ctx, "delete tier conformance-extra", func() error {
		_, stderr, err := e.Kubectl(ctx, "delete", "tier", "conformance-extra", "--ignore-not-found")
		if err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	}); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the Antrea-native policies: %s", strings.Join(errs, "; "))
	}
	return nil
}
