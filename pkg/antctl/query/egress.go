package query

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/util/suggest"
)

// Egresses returns the Egress named name, or every Egress (sorted by name)
// for "".
func Egresses(ctx context.Context, c *Clients, name string) ([]crdv1beta1.Egress, error) {
	cl := c.Antrea.CrdV1beta1().Egresses()
	tm := metav1.TypeMeta{APIVersion: crdv1beta1.SchemeGroupVersion.String(), Kind: "Egress"}
	if name != "" {
		eg, err := cl.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			var names []string
			if l, lerr := cl.List(ctx, metav1.ListOptions{}); lerr == nil {
				for _, i := range l.Items {
					names = append(names, i.Name)
				}
			}
			return nil, fmt.Errorf("no Egress %q%s", name, suggest.Hint(name, names))
		}
		if err != nil {
			return nil, fmt.Errorf("get Egress %s: %w", name, err)
		}
		eg.TypeMeta = tm
		return []crdv1beta1.Egress{*eg}, nil
	}
	l, err := cl.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Egresses: %w", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	for i := range l.Items {
		l.Items[i].TypeMeta = tm
	}
	return l.Items, nil
}

// ExternalIPPools returns the ExternalIPPool named name, or every pool
// (sorted by name) for "".
func ExternalIPPools(ctx context.Context, c *Clients, name string) ([]crdv1beta1.ExternalIPPool, error) {
	cl := c.Antrea.CrdV1beta1().ExternalIPPools()
	tm := metav1.TypeMeta{APIVersion: crdv1beta1.SchemeGroupVersion.String(), Kind: "ExternalIPPool"}
	if name != "" {
		p, err := cl.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			var names []string
			if l, lerr := cl.List(ctx, metav1.ListOptions{}); lerr == nil {
				for _, i := range l.Items {
					names = append(names, i.Name)
				}
			}
			return nil, fmt.Errorf("no ExternalIPPool %q%s", name, suggest.Hint(name, names))
		}
		if err != nil {
			return nil, fmt.Errorf("get ExternalIPPool %s: %w", name, err)
		}
		p.TypeMeta = tm
		return []crdv1beta1.ExternalIPPool{*p}, nil
	}
	l, err := cl.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ExternalIPPools: %w", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	for i := range l.Items {
		l.Items[i].TypeMeta = tm
	}
	return l.Items, nil
}
