package query

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/util/suggest"
)

// Egresses returns the Egress named name, or every Egress (sorted by name)
// for "".
func Egresses(ctx context.Context, c *Clients, name string) ([]crdv1beta1.Egress, error) {
	cl := c.Antrea.CrdV1beta1().Egresses()
	return oneOrAll(ctx, "Egress", name, cl.Get, cl.List,
		func(l *crdv1beta1.EgressList) []crdv1beta1.Egress { return l.Items }, "no Egress %q%s")
}

// ExternalIPPools returns the ExternalIPPool named name, or every pool
// (sorted by name) for "".
func ExternalIPPools(ctx context.Context, c *Clients, name string) ([]crdv1beta1.ExternalIPPool, error) {
	cl := c.Antrea.CrdV1beta1().ExternalIPPools()
	return oneOrAll(ctx, "ExternalIPPool", name, cl.Get, cl.List,
		func(l *crdv1beta1.ExternalIPPoolList) []crdv1beta1.ExternalIPPool { return l.Items }, "no ExternalIPPool %q%s")
}

// oneOrAll is the query of one cluster-scoped crd.antrea.io/v1beta1 kind:
// the object named name (when there is none, the error notFound, a format
// of the name and of a hint of the nearest names), or every object sorted by
// name for "". The objects carry their TypeMeta (for -o yaml).
func oneOrAll[T any, PT interface {
	*T
	metav1.Object
	runtime.Object
}, L any](ctx context.Context, kind, name string,
	get func(context.Context, string, metav1.GetOptions) (PT, error),
	list func(context.Context, metav1.ListOptions) (L, error),
	items func(L) []T, notFound string) ([]T, error) {
	gvk := crdv1beta1.SchemeGroupVersion.WithKind(kind)
	if name != "" {
		o, err := get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			var names []string
			if l, lerr := list(ctx, metav1.ListOptions{}); lerr == nil {
				for i := range items(l) {
					names = append(names, PT(&items(l)[i]).GetName())
				}
			}
			return nil, fmt.Errorf(notFound, name, suggest.Hint(name, names))
		}
		if err != nil {
			return nil, fmt.Errorf("get %s %s: %w", kind, name, err)
		}
		o.GetObjectKind().SetGroupVersionKind(gvk)
		return []T{*o}, nil
	}
	l, err := list(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing %ss: %w", kind, err)
	}
	out := items(l)
	sort.Slice(out, func(i, j int) bool { return PT(&out[i]).GetName() < PT(&out[j]).GetName() })
	for i := range out {
		PT(&out[i]).GetObjectKind().SetGroupVersionKind(gvk)
	}
	return out, nil
}
