package conformance

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/generator"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/test/labtest"
)

// The model of the upstream netpol tests.
var (
	baseNamespaces = []string{"x", "y", "z"}
	basePods       = []string{"a", "b", "c"}
)

// peer is one pod as the oracles and the prober see it.
type peer struct {
	Namespace string
	Name      string
	IP        string
	Node      string
	// NetNS is the path of the pod's netns (labtest.PodNetNS).
	NetNS    string
	Labels   map[string]string
	NSLabels map[string]string
	Ports    []corev1.ContainerPort
}

func (p peer) key() string { return p.Namespace + "/" + p.Name }

// cluster drives the lab's API server: it creates the model, applies a case's
// actions and reads back the state the oracles need.
type cluster struct {
	e *labEnv
	// namespaces are those the suite manages (the base ones plus any a case
	// created), so nothing else on a reused lab is touched or probed.
	namespaces map[string]bool
	// podSeq spreads created pods over the nodes deterministically.
	podSeq int
}

func newCluster(e *labEnv) *cluster {
	c := &cluster{e: e, namespaces: map[string]bool{}}
	for _, ns := range baseNamespaces {
		c.namespaces[ns] = true
	}
	return c
}

// sharedCluster is created once by the first test that needs it; tests of
// this package run one after the other, so it needs no lock.
var sharedCluster *cluster

// setup returns the cluster with the base model Ready and no policy.
func setup(t *testing.T) *cluster {
	t.Helper()
	e := requireLab(t)
	if sharedCluster == nil {
		sharedCluster = newCluster(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := sharedCluster.reset(ctx); err != nil {
		t.Fatalf("reset the model to namespaces x,y,z with pods a,b,c: %v", err)
	}
	return sharedCluster
}

// reset brings the cluster back to the base model: no policy in a managed
// namespace, namespaces x,y,z labelled ns=<name>, pods a,b,c labelled
// pod=<name> in each, and nothing else.
func (c *cluster) reset(ctx context.Context) error {
	client := c.e.Client
	for ns := range c.namespaces {
		err := client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete policies of namespace %s: %w", ns, err)
		}
	}
	for ns := range c.namespaces {
		if !slices.Contains(baseNamespaces, ns) {
			if err := c.deleteNamespace(ctx, ns); err != nil {
				return err
			}
		}
	}
	for _, ns := range baseNamespaces {
		if err := c.ensureNamespace(ctx, ns, map[string]string{"ns": ns}); err != nil {
			return err
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list pods of namespace %s: %w", ns, err)
		}
		present := map[string]bool{}
		for _, p := range pods.Items {
			if !slices.Contains(basePods, p.Name) || p.DeletionTimestamp != nil {
				if err := c.deletePod(ctx, ns, p.Name); err != nil {
					return err
				}
				continue
			}
			present[p.Name] = true
			want := map[string]string{"pod": p.Name}
			if !maps.Equal(p.Labels, want) {
				if err := c.setPodLabels(ctx, ns, p.Name, want); err != nil {
					return err
				}
			}
		}
		for _, name := range basePods {
			if !present[name] {
				if err := c.createPod(ctx, ns, name, map[string]string{"pod": name}); err != nil {
					return err
				}
			}
		}
	}
	return c.waitPodsReady(ctx)
}

// nodeFor spreads pods over the nodes: the base pods alternate (x/a on the
// first node, x/b on the second, ...), later pods continue the sequence.
func (c *cluster) nodeFor(ns, name string) string {
	nodes := c.e.Nodes
	nsIdx, podIdx := slices.Index(baseNamespaces, ns), slices.Index(basePods, name)
	if nsIdx >= 0 && podIdx >= 0 {
		return nodes[(nsIdx*len(basePods)+podIdx)%len(nodes)]
	}
	c.podSeq++
	return nodes[c.podSeq%len(nodes)]
}

func (c *cluster) ensureNamespace(ctx context.Context, name string, labels map[string]string) error {
	client := c.e.Client
	c.namespaces[name] = true
	got, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	} else if got.DeletionTimestamp != nil {
		if err := labtest.WaitGone(ctx, "namespace "+name, func() error {
			_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			return err
		}); err != nil {
			return err
		}
		return c.ensureNamespace(ctx, name, labels)
	} else if !labelsEqualIgnoringName(got.Labels, labels) {
		if err := c.setNamespaceLabels(ctx, name, labels); err != nil {
			return err
		}
	}
	// Pods need the namespace's default ServiceAccount, which
	// kube-controller-manager creates.
	return labtest.WaitDefaultServiceAccount(ctx, client, name)
}

// labelsEqualIgnoringName compares namespace labels without the
// kubernetes.io/metadata.name label the API server adds to every namespace.
func labelsEqualIgnoringName(got, want map[string]string) bool {
	g := maps.Clone(got)
	delete(g, corev1.LabelMetadataName)
	w := maps.Clone(want)
	delete(w, corev1.LabelMetadataName)
	return maps.Equal(g, w)
}

func (c *cluster) setNamespaceLabels(ctx context.Context, name string, labels map[string]string) error {
	client := c.e.Client
	ns, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", name, err)
	}
	ns.Labels = maps.Clone(labels)
	if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set labels of namespace %s: %w", name, err)
	}
	return nil
}

func (c *cluster) deleteNamespace(ctx context.Context, name string) error {
	client := c.e.Client
	err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	err = labtest.WaitGone(ctx, "namespace "+name, func() error {
		_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if err == nil {
		delete(c.namespaces, name)
	}
	return err
}

func (c *cluster) createPod(ctx context.Context, ns, name string, labels map[string]string) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: maps.Clone(labels)},
		Spec: corev1.PodSpec{
			// Bound to a node by the test, not the scheduler, so that every
			// run puts the same pods on the same nodes.
			NodeName:                      c.nodeFor(ns, name),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			// Serving the ports of the upstream netpol tests, declared with
			// the names cyclonus' generator refers to (serve-<port>-<protocol>).
			Containers: []corev1.Container{labtest.TestPodContainer("server", []int{80, 81}, []int{80, 81})},
		},
	}
	if _, err := c.e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", ns, name, err)
	}
	return nil
}

func (c *cluster) setPodLabels(ctx context.Context, ns, name string, labels map[string]string) error {
	client := c.e.Client
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	pod.Labels = maps.Clone(labels)
	if _, err := client.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set labels of pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// deletePod deletes a pod and waits until the node has torn it down and the
// API server no longer has it.
func (c *cluster) deletePod(ctx context.Context, ns, name string) error {
	client := c.e.Client
	err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return labtest.WaitGone(ctx, "pod "+ns+"/"+name, func() error {
		_, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

// waitPodsReady waits until every pod of the managed namespaces is Ready
// with an IP and a netns the prober can enter.
func (c *cluster) waitPodsReady(ctx context.Context) error {
	return labtest.Poll(ctx, "pods Ready", func() error {
		var waiting []string
		for ns := range c.namespaces {
			pods, err := c.e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if err := labtest.CheckPodUsable(&p); err != nil {
					waiting = append(waiting, err.Error())
				}
			}
		}
		if len(waiting) > 0 {
			sort.Strings(waiting)
			return fmt.Errorf("not ready: %s", strings.Join(waiting, "; "))
		}
		return nil
	})
}

// peers reads every pod of the managed namespaces as the oracles see it.
func (c *cluster) peers(ctx context.Context) ([]peer, error) {
	var out []peer
	for ns := range c.namespaces {
		n, err := c.e.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get namespace %s: %w", ns, err)
		}
		pods, err := c.e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods of namespace %s: %w", ns, err)
		}
		for _, p := range pods.Items {
			ip := podAddress(&p)
			if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
				continue
			}
			if ip == "" {
				return nil, fmt.Errorf("pod %s/%s has no IPv6 address (%v), and %s asks to probe IPv6: is the lab dual-stack or IPv6?",
					ns, p.Name, p.Status.PodIPs, envIPFamily)
			}
			var ports []corev1.ContainerPort
			for _, ctr := range p.Spec.Containers {
				ports = append(ports, ctr.Ports...)
			}
			netns, err := labtest.PodNetNS(&p)
			if err != nil {
				return nil, err
			}
			out = append(out, peer{
				Namespace: ns, Name: p.Name, IP: ip, Node: p.Spec.NodeName,
				NetNS: netns, Labels: p.Labels, NSLabels: n.Labels, Ports: ports,
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out, nil
}

// podAddress is the pod's address the probes dial and the oracles judge:
// its IPv6 one when the package probes IPv6 (ANTREA_CONFORMANCE_IP_FAMILY),
// else its first; "" while it has none of that family.
func podAddress(p *corev1.Pod) string {
	if !env.probeIPv6 {
		return p.Status.PodIP
	}
	for _, a := range p.Status.PodIPs {
		if ip, err := netip.ParseAddr(a.IP); err == nil && ip.Is6() {
			return a.IP
		}
	}
	return ""
}

// policies reads back every NetworkPolicy of the managed namespaces, as the
// API server stored (and defaulted) them: the oracles judge what the product
// was given.
func (c *cluster) policies(ctx context.Context) ([]*networkingv1.NetworkPolicy, error) {
	var out []*networkingv1.NetworkPolicy
	for ns := range c.namespaces {
		list, err := c.e.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list policies of namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

// apply performs one action of a cyclonus test step.
func (c *cluster) apply(ctx context.Context, a *generator.Action) error {
	client := c.e.Client
	switch {
	case a.CreatePolicy != nil:
		p := a.CreatePolicy.Policy.DeepCopy()
		c.namespaces[p.Namespace] = true
		if _, err := client.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create policy %s/%s: %w", p.Namespace, p.Name, err)
		}
	case a.UpdatePolicy != nil:
		p := a.UpdatePolicy.Policy
		cur, err := client.NetworkingV1().NetworkPolicies(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get policy %s/%s: %w", p.Namespace, p.Name, err)
		}
		cur.Labels = maps.Clone(p.Labels)
		cur.Spec = *p.Spec.DeepCopy()
		if _, err := client.NetworkingV1().NetworkPolicies(p.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update policy %s/%s: %w", p.Namespace, p.Name, err)
		}
	case a.DeletePolicy != nil:
		d := a.DeletePolicy
		if err := client.NetworkingV1().NetworkPolicies(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete policy %s/%s: %w", d.Namespace, d.Name, err)
		}
	case a.CreateNamespace != nil:
		return c.ensureNamespace(ctx, a.CreateNamespace.Namespace, a.CreateNamespace.Labels)
	case a.SetNamespaceLabels != nil:
		return c.setNamespaceLabels(ctx, a.SetNamespaceLabels.Namespace, a.SetNamespaceLabels.Labels)
	case a.DeleteNamespace != nil:
		return c.deleteNamespace(ctx, a.DeleteNamespace.Namespace)
	case a.CreatePod != nil:
		cp := a.CreatePod
		if err := c.createPod(ctx, cp.Namespace, cp.Pod, cp.Labels); err != nil {
			return err
		}
		return c.waitPodsReady(ctx)
	case a.SetPodLabels != nil:
		return c.setPodLabels(ctx, a.SetPodLabels.Namespace, a.SetPodLabels.Pod, a.SetPodLabels.Labels)
	case a.DeletePod != nil:
		return c.deletePod(ctx, a.DeletePod.Namespace, a.DeletePod.Pod)
	case a.ReadNetworkPolicies != nil:
		// Reading changes nothing; the oracles read the policies anyway.
	default:
		return fmt.Errorf("unsupported cyclonus action %+v", a)
	}
	return nil
}
