// Package registry holds the REST storage of the controlplane resources:
// get, list and watch over the in-memory stores (with the nodeName field
// selector evaluated on the server), table output for kubectl, and the
// networkpolicies/status subresource by which agents report realization.
package registry

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/storage"
)

// REST serves one read-only, watchable controlplane resource from a store.
type REST struct {
	store        storage.Interface
	resource     schema.GroupResource
	singular     string
	newFunc      func() runtime.Object
	newListFunc  func() runtime.Object
	tableConvert func(ctx context.Context, obj runtime.Object) (*metav1.Table, error)
}

var (
	_ rest.Storage              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

// NewAddressGroupREST serves addressgroups from the AddressGroup store.
func NewAddressGroupREST(s storage.Interface) *REST {
	return &REST{store: s, resource: controlplane.Resource("addressgroups"), singular: "addressgroup",
		newFunc:      func() runtime.Object { return &controlplane.AddressGroup{} },
		newListFunc:  func() runtime.Object { return &controlplane.AddressGroupList{} },
		tableConvert: groupTable,
	}
}

// NewAppliedToGroupREST serves appliedtogroups from the AppliedToGroup store.
func NewAppliedToGroupREST(s storage.Interface) *REST {
	return &REST{store: s, resource: controlplane.Resource("appliedtogroups"), singular: "appliedtogroup",
		newFunc:      func() runtime.Object { return &controlplane.AppliedToGroup{} },
		newListFunc:  func() runtime.Object { return &controlplane.AppliedToGroupList{} },
		tableConvert: groupTable,
	}
}

// NewEgressGroupREST serves egressgroups from the EgressGroup store.
func NewEgressGroupREST(s storage.Interface) *REST {
	return &REST{store: s, resource: controlplane.Resource("egressgroups"), singular: "egressgroup",
		newFunc:      func() runtime.Object { return &controlplane.EgressGroup{} },
		newListFunc:  func() runtime.Object { return &controlplane.EgressGroupList{} },
		tableConvert: groupTable,
	}
}

// NewNetworkPolicyREST serves networkpolicies from the NetworkPolicy store;
// its table shows how many Nodes realized each policy according to status.
func NewNetworkPolicyREST(s storage.Interface, status *StatusStore) *REST {
	t := &policyTable{status: status}
	return &REST{store: s, resource: controlplane.Resource("networkpolicies"), singular: "networkpolicy",
		newFunc:      func() runtime.Object { return &controlplane.NetworkPolicy{} },
		newListFunc:  func() runtime.Object { return &controlplane.NetworkPolicyList{} },
		tableConvert: t.convert,
	}
}

// New returns an empty object of the resource.
func (r *REST) New() runtime.Object { return r.newFunc() }

// NewList returns an empty list of the resource.
func (r *REST) NewList() runtime.Object { return r.newListFunc() }

// Destroy has nothing to release: the store outlives the server.
func (r *REST) Destroy() {}

// NamespaceScoped is false: computed objects are cluster-scoped.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName is the singular resource name for kubectl.
func (r *REST) GetSingularName() string { return r.singular }

// Get returns one object with every member (no node filtering on get).
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, ok := r.store.GetObject(name, nil)
	if !ok {
		return nil, apierrors.NewNotFound(r.resource, name)
	}
	return obj, nil
}

func selectorsFrom(options *metainternalversion.ListOptions) (*storage.Selectors, error) {
	sel := &storage.Selectors{}
	if options == nil {
		return sel, nil
	}
	if options.LabelSelector != nil && !options.LabelSelector.Empty() {
		return nil, apierrors.NewBadRequest("controlplane objects have no labels; label selectors are not supported")
	}
	if options.FieldSelector != nil && !options.FieldSelector.Empty() {
		for _, req := range options.FieldSelector.Requirements() {
			if req.Operator != "=" && req.Operator != "==" {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s: only equality is supported", req.Field))
			}
			if req.Field != storage.NodeNameField && req.Field != "metadata.name" {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field selector %s is not supported (use nodeName or metadata.name)", req.Field))
			}
		}
		sel.Field = options.FieldSelector
	}
	return sel, nil
}

// List returns what the selector sees: with nodeName=X only the objects whose
// span holds X (and for AppliedToGroups only X's members); without it, all.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	sel, err := selectorsFrom(options)
	if err != nil {
		return nil, err
	}
	objs, rv := r.store.ListObjects(sel)
	list := r.newListFunc()
	if err := meta.SetList(list, objs); err != nil {
		return nil, fmt.Errorf("building %s list: %w", r.resource, err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("building %s list: %w", r.resource, err)
	}
	lm.SetResourceVersion(strconv.FormatUint(rv, 10))
	return list, nil
}

// Watch streams what the selector sees, from a resourceVersion if given.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	sel, err := selectorsFrom(options)
	if err != nil {
		return nil, err
	}
	opts := storage.WatchOptions{Selectors: sel}
	if options != nil {
		opts.ResourceVersion = options.ResourceVersion
		opts.AllowBookmarks = options.AllowWatchBookmarks
		// The watch-list protocol is sendInitialEvents with bookmarks. The server
		// also defaults sendInitialEvents=true on a plain watch from version ""
		// or "0"; that one must get no annotated bookmark (the generic watch
		// handler has no watch-list hook for it).
		opts.SendInitialEvents = options.SendInitialEvents != nil && *options.SendInitialEvents && options.AllowWatchBookmarks
	}
	return r.store.Watch(ctx, opts)
}

// ConvertToTable renders objects for kubectl get.
func (r *REST) ConvertToTable(ctx context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	return r.tableConvert(ctx, obj)
}

// NodeNameSelector is the field selector an agent on a Node uses.
func NodeNameSelector(node string) fields.Selector {
	return fields.OneTermEqualSelector(storage.NodeNameField, node)
}
