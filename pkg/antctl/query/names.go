package query

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/util/suggest"
)

// Checks of what the user named. Each answers one line naming the unknown
// object and, for a typo, the closest existing one. A check the credentials
// may not make (the agent's ServiceAccount cannot read Namespaces or Pods)
// passes: the query then simply finds nothing.

// CheckNamespace says whether namespace ns exists.
func CheckNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil || apierrors.IsForbidden(err) {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return fmt.Errorf("namespace %q not found%s", ns, suggest.Hint(ns, namespaceNames(ctx, kube)))
}

func namespaceNames(ctx context.Context, kube kubernetes.Interface) []string {
	l, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	return namesOf(l.Items, func(n *corev1.Namespace) string { return n.Name })
}

// CheckPod says whether pod ns/name exists.
func CheckPod(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	_, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil || apierrors.IsForbidden(err) {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	if err := CheckNamespace(ctx, kube, ns); err != nil {
		return err
	}
	return fmt.Errorf("pod %q not found in namespace %s%s", name, ns, suggest.Hint(name, podNames(ctx, &Clients{Kube: kube}, ns)))
}

// CheckNode says whether Node name exists.
func CheckNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	_, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err == nil || apierrors.IsForbidden(err) {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s: %w", name, err)
	}
	names, _ := NodeNames(ctx, kube)
	return fmt.Errorf("node %q not found%s", name, suggest.Hint(name, names))
}

// NodeNames lists the cluster's Nodes.
func NodeNames(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return namesOf(list.Items, func(n *corev1.Node) string { return n.Name }), nil
}

// notFound is the error for a name a query did not find, with the closest name.
func notFound(resource, name string, names []string) error {
	return fmt.Errorf("%s %q not found%s", resource, name, suggest.Hint(name, names))
}
