// Package scale is the scale bench of issue 31 (hack/bench/scale.sh,
// docs/scale.md): simulated Nodes (pkg/lab/simnodes) and simulated agents
// (pkg/agent/simulator) against a real kube-apiserver and the real
// antrea-controller binary. This file holds the workload and an
// independent recomputation, from the API objects, of what each Node must
// receive: a policy's span is the set of Nodes hosting a pod it applies to.
package scale

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab/simnodes"
)

// WorkloadLabel marks every namespace and pod the bench creates.
const WorkloadLabel = "antrea.io/scale-bench"

// MonitoringNamespace holds the pods the cluster-wide policies allow.
const MonitoringNamespace = "scale-monitoring"

// Workload is a fixed per-node workload: PodsPerNode pods per node on
// average, in namespaces of NamespaceSize pods placed on random nodes; two
// K8s NetworkPolicies per namespace (default-deny ingress, web from client
// on port 80); ACNPs cluster-wide policies applied to every workload pod
// allowing the monitoring namespace.
type Workload struct {
	Nodes, PodsPerNode, NamespaceSize, ACNPs int
	Seed                                     int64
}

// Validate refuses a workload that cannot be built, naming the field.
func (w Workload) Validate() error {
	switch {
	case w.Nodes < 1:
		return fmt.Errorf("nodes must be at least 1, got %d", w.Nodes)
	case w.PodsPerNode < 1 || w.PodsPerNode > 250:
		return fmt.Errorf("podsPerNode must be between 1 and 250 (a /24 per node), got %d", w.PodsPerNode)
	case w.NamespaceSize < 2:
		return fmt.Errorf("namespaceSize must be at least 2 (a web and a client pod), got %d", w.NamespaceSize)
	case w.ACNPs < 0 || w.ACNPs > 100:
		return fmt.Errorf("acnps must be between 0 and 100, got %d", w.ACNPs)
	}
	return nil
}

// Namespaces is the number of workload namespaces.
func (w Workload) Namespaces() int {
	return (w.Nodes*w.PodsPerNode + w.NamespaceSize - 1) / w.NamespaceSize
}

// Pods is the number of pods, the monitoring ones included.
func (w Workload) Pods() int { return w.Namespaces()*w.NamespaceSize + monitoringPods }

const monitoringPods = 5

// NamespaceName is workload namespace j.
func NamespaceName(j int) string { return fmt.Sprintf("scale-ns-%05d", j) }

// Pod is one pod to create.
type Pod struct {
	Namespace, Name, Node string
	Labels                map[string]string
}

// PodsToCreate places the pods: the same seed gives the same placement.
func (w Workload) PodsToCreate() []Pod {
	r := rand.New(rand.NewSource(w.Seed))
	var out []Pod
	for j := 0; j < w.Namespaces(); j++ {
		for k := 0; k < w.NamespaceSize; k++ {
			app := "web"
			if k%2 == 1 {
				app = "client"
			}
			out = append(out, Pod{Namespace: NamespaceName(j), Name: fmt.Sprintf("p-%03d", k),
				Node: simnodes.NodeName(r.Intn(w.Nodes)), Labels: map[string]string{"app": app, WorkloadLabel: "true"}})
		}
	}
	for k := 0; k < monitoringPods; k++ {
		out = append(out, Pod{Namespace: MonitoringNamespace, Name: fmt.Sprintf("monitor-%d", k),
			Node: simnodes.NodeName(r.Intn(w.Nodes)), Labels: map[string]string{"role": "monitor", WorkloadLabel: "true"}})
	}
	return out
}

// PodObject is a pod bound to its node (the simulated kubelet runs it).
func PodObject(p Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels},
		Spec: corev1.PodSpec{NodeName: p.Node, Containers: []corev1.Container{{Name: "c", Image: "simulated",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}}},
	}
}

// K8sPolicies are namespace j's two K8s NetworkPolicies.
func K8sPolicies(j int) []*networkingv1.NetworkPolicy {
	ns := NamespaceName(j)
	return []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-deny"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		WebFrom(ns, "web-from-client", 80),
	}
}

// WebFrom is a K8s NetworkPolicy letting the namespace's client pods reach
// its web pods on port.
func WebFrom(ns, name string, port int32) *networkingv1.NetworkPolicy {
	p := intstr.FromInt32(port)
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &p}},
			}},
		}}
}

// ACNP is cluster-wide policy i: every workload pod accepts the
// monitoring namespace on port.
func ACNP(i int, port int32) *crdv1beta1.ClusterNetworkPolicy {
	allow := crdv1beta1.RuleActionAllow
	p := intstr.FromInt32(port)
	tcp := corev1.ProtocolTCP
	return &crdv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-acnp-%d", i)},
		Spec: crdv1beta1.ClusterNetworkPolicySpec{
			Priority: float64(i + 1),
			AppliedTo: []crdv1beta1.AppliedTo{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{WorkloadLabel: "true", "role": "workload"}}}},
			Ingress: []crdv1beta1.Rule{{Action: &allow,
				Ports: []crdv1beta1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
				From: []crdv1beta1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"role": "monitoring"}}}}}},
		}}
}

// Create creates the namespaces, pods and policies (the pods' status is
// the simulated kubelet's job).
func (w Workload) Create(ctx context.Context, kube kubernetes.Interface, crd versioned.Interface, workers int) error {
	if err := w.Validate(); err != nil {
		return err
	}
	nss := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: MonitoringNamespace,
		Labels: map[string]string{WorkloadLabel: "true", "role": "monitoring"}}}}
	for j := 0; j < w.Namespaces(); j++ {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NamespaceName(j),
			Labels: map[string]string{WorkloadLabel: "true", "role": "workload"}}})
	}
	if err := parallel(ctx, len(nss), workers, func(i int) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, nss[i], metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	for i := 0; i < w.ACNPs; i++ {
		if _, err := crd.CrdV1beta1().ClusterNetworkPolicies().Create(ctx, ACNP(i, int32(9100+i)), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("acnp %d: %w", i, err)
		}
	}
	if err := parallel(ctx, w.Namespaces(), workers, func(j int) error {
		for _, np := range K8sPolicies(j) {
			if _, err := kube.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("networkpolicy %s/%s: %w", np.Namespace, np.Name, err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	pods := w.PodsToCreate()
	return parallel(ctx, len(pods), workers, func(i int) error {
		// In a lab, kube-apiserver's ServiceAccount admission refuses a
		// pod until kube-controller-manager has made its namespace's
		// default ServiceAccount: retried for at most a minute.
		for end := time.Now().Add(time.Minute); ; {
			_, err := kube.CoreV1().Pods(pods[i].Namespace).Create(ctx, PodObject(pods[i]), metav1.CreateOptions{})
			if err == nil {
				return nil
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "service account") || time.Now().After(end) {
				return fmt.Errorf("pod %s/%s: %w", pods[i].Namespace, pods[i].Name, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	idx := make(chan int)
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			var first error
			for i := range idx {
				if first == nil {
					first = f(i)
				}
			}
			errc <- first
		}()
	}
	var err error
	for i := 0; i < n && ctx.Err() == nil; i++ {
		idx <- i
	}
	close(idx)
	for w := 0; w < workers; w++ {
		if e := <-errc; e != nil && err == nil {
			err = e
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// Expected is what one node must hold for one policy: the pods of the
// node it applies to and the pods its rules' peers select.
type Expected struct {
	AppliedTo, Peers sets.Set[string]
}

// Expectation is, per node, per policy key (type/namespace/name).
type Expectation map[string]map[string]Expected

// Recompute derives each node's expected state from the API objects
// (pods, namespaces, K8s NetworkPolicies, ACNPs of the workload), with
// nothing from the controller: span = nodes hosting a pod the policy
// applies to. Only the shapes the workload uses are understood; any other
// is refused, naming the field.
func Recompute(ctx context.Context, kube kubernetes.Interface, crd versioned.Interface) (Expectation, error) {
	podList, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nsList, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nsLabels := map[string]labels.Set{}
	for _, ns := range nsList.Items {
		nsLabels[ns.Name] = ns.Labels
	}
	var pods []corev1.Pod
	for _, p := range podList.Items {
		// The controller's groups hold pods with an IP that have not ended.
		if p.Status.PodIP != "" && p.Spec.NodeName != "" && p.DeletionTimestamp == nil &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			pods = append(pods, p)
		}
	}
	// selectPods returns the pods matching a pod selector (nil: all) in
	// namespace ns ("": any namespace matching nsSel; nil nsSel: all).
	selectPods := func(ns string, nsSel, podSel *metav1.LabelSelector) ([]corev1.Pod, error) {
		var ps, nss labels.Selector = labels.Everything(), labels.Everything()
		var err error
		if podSel != nil {
			if ps, err = metav1.LabelSelectorAsSelector(podSel); err != nil {
				return nil, err
			}
		}
		if nsSel != nil {
			if nss, err = metav1.LabelSelectorAsSelector(nsSel); err != nil {
				return nil, err
			}
		}
		var out []corev1.Pod
		for _, p := range pods {
			if (ns == "" || p.Namespace == ns) && nss.Matches(nsLabels[p.Namespace]) && ps.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
		return out, nil
	}
	exp := Expectation{}
	add := func(key string, applied, peers []corev1.Pod) {
		peerKeys := sets.New[string]()
		for _, p := range peers {
			peerKeys.Insert("pod:" + p.Namespace + "/" + p.Name)
		}
		for _, p := range applied {
			byPolicy := exp[p.Spec.NodeName]
			if byPolicy == nil {
				byPolicy = map[string]Expected{}
				exp[p.Spec.NodeName] = byPolicy
			}
			e, ok := byPolicy[key]
			if !ok {
				e = Expected{AppliedTo: sets.New[string](), Peers: peerKeys}
				byPolicy[key] = e
			}
			e.AppliedTo.Insert("pod:" + p.Namespace + "/" + p.Name)
		}
	}

	nps, err := kube.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, np := range nps.Items {
		where := "networkpolicy " + np.Namespace + "/" + np.Name
		applied, err := selectPods(np.Namespace, nil, &np.Spec.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("%s spec.podSelector: %w", where, err)
		}
		var peers []corev1.Pod
		var rulePeers []networkingv1.NetworkPolicyPeer
		for _, r := range np.Spec.Ingress {
			rulePeers = append(rulePeers, r.From...)
		}
		for _, r := range np.Spec.Egress {
			rulePeers = append(rulePeers, r.To...)
		}
		for i, peer := range rulePeers {
			if peer.IPBlock != nil {
				return nil, fmt.Errorf("%s peer %d: ipBlock is not recomputed by the bench", where, i)
			}
			ns := np.Namespace
			if peer.NamespaceSelector != nil {
				ns = ""
			}
			sel, err := selectPods(ns, peer.NamespaceSelector, peer.PodSelector)
			if err != nil {
				return nil, fmt.Errorf("%s peer %d: %w", where, i, err)
			}
			peers = append(peers, sel...)
		}
		add("K8sNetworkPolicy/"+np.Namespace+"/"+np.Name, applied, peers)
	}

	acnps, err := crd.CrdV1beta1().ClusterNetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, cnp := range acnps.Items {
		where := "clusternetworkpolicy " + cnp.Name
		var applied []corev1.Pod
		for i, at := range cnp.Spec.AppliedTo {
			if at.Group != "" || at.ServiceAccount != nil || at.Service != nil || at.NodeSelector != nil || at.ExternalEntitySelector != nil {
				return nil, fmt.Errorf("%s spec.appliedTo[%d]: only podSelector and namespaceSelector are recomputed by the bench", where, i)
			}
			sel, err := selectPods("", at.NamespaceSelector, at.PodSelector)
			if err != nil {
				return nil, fmt.Errorf("%s spec.appliedTo[%d]: %w", where, i, err)
			}
			applied = append(applied, sel...)
		}
		var peers []corev1.Pod
		rules := append(append([]crdv1beta1.Rule(nil), cnp.Spec.Ingress...), cnp.Spec.Egress...)
		for ri, r := range rules {
			if len(r.AppliedTo) > 0 {
				return nil, fmt.Errorf("%s rule %d: appliedTo per rule is not recomputed by the bench", where, ri)
			}
			for pi, peer := range append(append([]crdv1beta1.NetworkPolicyPeer(nil), r.From...), r.To...) {
				if peer.IPBlock != nil || peer.Group != "" || peer.Namespaces != nil {
					return nil, fmt.Errorf("%s rule %d peer %d: only podSelector and namespaceSelector are recomputed by the bench", where, ri, pi)
				}
				sel, err := selectPods("", peer.NamespaceSelector, peer.PodSelector)
				if err != nil {
					return nil, fmt.Errorf("%s rule %d peer %d: %w", where, ri, pi, err)
				}
				peers = append(peers, sel...)
			}
		}
		add("AntreaClusterNetworkPolicy//"+cnp.Name, applied, peers)
	}
	return exp, nil
}

// Diff compares what a node holds (policy key -> applied-to and peer
// member keys) with what it should; it returns the differences, sorted.
func Diff(node string, want map[string]Expected, got map[string]Expected) []string {
	var out []string
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			out = append(out, fmt.Sprintf("%s: policy %s missing", node, key))
			continue
		}
		if !w.AppliedTo.Equal(g.AppliedTo) {
			out = append(out, fmt.Sprintf("%s: policy %s applied to %v, want %v", node, key, sets.List(g.AppliedTo), sets.List(w.AppliedTo)))
		}
		if !w.Peers.Equal(g.Peers) {
			out = append(out, fmt.Sprintf("%s: policy %s peers: %d extra %v, %d missing %v", node, key,
				g.Peers.Difference(w.Peers).Len(), head(g.Peers.Difference(w.Peers)),
				w.Peers.Difference(g.Peers).Len(), head(w.Peers.Difference(g.Peers))))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			out = append(out, fmt.Sprintf("%s: policy %s held but not in the span", node, key))
		}
	}
	sort.Strings(out)
	return out
}

func head(s sets.Set[string]) []string {
	l := sets.List(s)
	if len(l) > 3 {
		l = l[:3]
	}
	return l
}
