package query

import (
	"context"
	"fmt"

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
	var names []string
	if list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
	}
	return fmt.Errorf("namespace %q not found%s", ns, suggest.Hint(ns, names))
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
	var names []string
	if list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
	}
	return fmt.Errorf("pod %q not found in namespace %s%s", name, ns, suggest.Hint(name, names))
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
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names, nil
}

// notFound is the error for a name a query did not find, with the closest name.
func notFound(resource, name string, names []string) error {
	return fmt.Errorf("%s %q not found%s", resource, name, suggest.Hint(name, names))
}
