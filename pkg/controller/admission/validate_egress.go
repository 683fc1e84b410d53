package admission

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/externalippool"
)

// The paths of the Egress and ExternalIPPool webhooks (upstream's).
const (
	PathValidateEgress         = "/validate/egress"
	PathValidateExternalIPPool = "/validate/externalippool"
)

// IPLookup is what the Egress and ExternalIPPool validation reads of the
// cluster. ExternalIPPool returns nil (and no error) for a pool that does
// not exist.
type IPLookup interface {
	ExternalIPPool(ctx context.Context, name string) (*crdv1beta1.ExternalIPPool, error)
	ExternalIPPools(ctx context.Context) ([]*crdv1beta1.ExternalIPPool, error)
	// EgressesOfPool are the Egresses whose externalIPPool (or one of
	// whose externalIPPools) is pool.
	EgressesOfPool(ctx context.Context, pool string) ([]*crdv1beta1.Egress, error)
	// ServicesOfPool are the Services whose annotation
	// service.antrea.io/external-ip-pool names pool.
	ServicesOfPool(ctx context.Context, pool string) ([]*corev1.Service, error)
}

// EgressValidator checks Egresses and ExternalIPPools as upstream's
// webhooks do, naming the field of each error.
type EgressValidator struct {
	lookup IPLookup
}

// NewEgressValidator returns a validator reading the cluster through lookup.
func NewEgressValidator(lookup IPLookup) *EgressValidator {
	return &EgressValidator{lookup: lookup}
}

// EgressHandlers are the webhooks of Egress and ExternalIPPool by path.
func EgressHandlers(v *EgressValidator) map[string]http.Handler {
	return map[string]http.Handler{
		PathValidateEgress:         reviewHandler(reviewObject(v.ValidateEgress)),
		PathValidateExternalIPPool: reviewHandler(v.reviewExternalIPPool),
	}
}

func (v *EgressValidator) reviewExternalIPPool(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var p, old crdv1beta1.ExternalIPPool
	if resp := decode(req, &p, &old); resp != nil {
		return resp
	}
	switch req.Operation {
	case admissionv1.Create:
		return verdict(v.ValidateExternalIPPool(ctx, &p, nil))
	case admissionv1.Update:
		return verdict(v.ValidateExternalIPPool(ctx, &p, &old))
	case admissionv1.Delete:
		return verdict(v.ValidateExternalIPPoolDelete(ctx, &old))
	}
	return verdict(nil)
}

// ValidateExternalIPPool refuses a pool with a bad range (a bad CIDR or IP,
// start after end, start and end of two families), ranges that overlap each
// other or another pool's, a subnetInfo the ranges are not in, a bad
// nodeSelector, and, on update, ranges that leave out an IP an Egress holds.
func (v *EgressValidator) ValidateExternalIPPool(ctx context.Context, p, old *crdv1beta1.ExternalIPPool) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	rangesPath := specPath.Child("ipRanges")
	ranges := make([]externalippool.Range, len(p.Spec.IPRanges))
	ok := make([]bool, len(p.Spec.IPRanges))
	for i, r := range p.Spec.IPRanges {
		pr, err := externalippool.ParseRange(r)
		if err != nil {
			fe := err.(*externalippool.FieldError)
			errs = append(errs, field.Invalid(rangesPath.Index(i).Child(fe.Field), valueOf(r, fe.Field), fe.Msg))
			continue
		}
		ranges[i], ok[i] = pr, true
		for j := 0; j < i; j++ {
			if ok[j] && ranges[j].Overlaps(pr) {
				errs = append(errs, field.Invalid(rangesPath.Index(i), pr.String(), fmt.Sprintf("overlaps ipRanges[%d] (%s)", j, ranges[j])))
			}
		}
	}
	if len(p.Spec.IPRanges) == 0 {
		errs = append(errs, field.Required(rangesPath, "a pool needs at least one IP range"))
	}
	if si := p.Spec.SubnetInfo; si != nil {
		errs = append(errs, validateSubnetInfo(si, ranges, ok, specPath.Child("subnetInfo"), rangesPath)...)
	}
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector); err != nil {
		errs = append(errs, field.Invalid(specPath.Child("nodeSelector"), p.Spec.NodeSelector, err.Error()))
	}
	if len(errs) > 0 {
		return errs
	}
	others, err := v.lookup.ExternalIPPools(ctx)
	if err != nil {
		return field.ErrorList{field.InternalError(rangesPath, err)}
	}
	for _, o := range others {
		if o.Name == p.Name {
			continue
		}
		oranges, err := externalippool.ParseRanges(o.Spec)
		if err != nil {
			continue
		}
		for i, r := range ranges {
			for j, or := range oranges {
				if r.Overlaps(or) {
					errs = append(errs, field.Invalid(rangesPath.Index(i), r.String(),
						fmt.Sprintf("overlaps ipRanges[%d] (%s) of ExternalIPPool %s", j, or, o.Name)))
				}
			}
		}
	}
	if old != nil {
		errs = append(errs, v.heldIPsStayIn(ctx, p.Name, ranges, rangesPath)...)
	}
	return errs
}

// heldIPsStayIn refuses ranges that leave out an IP an Egress or a
// LoadBalancer Service holds of the pool.
func (v *EgressValidator) heldIPsStayIn(ctx context.Context, pool string, ranges []externalippool.Range, path *field.Path) field.ErrorList {
	held, err := v.holders(ctx, pool)
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	var errs field.ErrorList
	for _, h := range held {
		in := false
		for _, r := range ranges {
			in = in || r.Contains(h.ip)
		}
		if !in {
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("IP %s allocated to %s would be out of the pool's ranges", h.ip, h.holder)))
		}
	}
	return errs
}

// heldIP is an IP of a pool and what holds it ("Egress e1 (spec.egressIP)").
type heldIP struct {
	ip     netip.Addr
	holder string
}

// holders are the IPs of pool held by Egresses (their egressIP or
// egressIPs) and by LoadBalancer Services that take their IP from it (their
// status.loadBalancer.ingress; see pkg/controller/serviceexternalip).
func (v *EgressValidator) holders(ctx context.Context, pool string) ([]heldIP, error) {
	egresses, err := v.lookup.EgressesOfPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	var out []heldIP
	for _, eg := range egresses {
		for _, ip := range ipsFromPool(eg, pool) {
			out = append(out, heldIP{ip: ip, holder: "Egress " + eg.Name})
		}
	}
	svcs, err := v.lookup.ServicesOfPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil ||
			svc.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey] != pool {
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil {
				out = append(out, heldIP{ip: ip.Unmap(), holder: fmt.Sprintf("Service %s/%s (status.loadBalancer.ingress)", svc.Namespace, svc.Name)})
			}
		}
	}
	return out, nil
}

// ipsFromPool are the IPs an Egress holds from pool: its egressIP with its
// externalIPPool, or the egressIPs entries at pool's index in externalIPPools.
func ipsFromPool(eg *crdv1beta1.Egress, pool string) []netip.Addr {
	var out []netip.Addr
	add := func(s string) {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	if eg.Spec.ExternalIPPool == pool {
		add(eg.Spec.EgressIP)
	}
	for i, p := range eg.Spec.ExternalIPPools {
		if p == pool && i < len(eg.Spec.EgressIPs) {
			add(eg.Spec.EgressIPs[i])
		}
	}
	return out
}

func valueOf(r crdv1beta1.IPRange, f string) string {
	switch f {
	case "start":
		return r.Start
	case "end":
		return r.End
	}
	return r.CIDR
}

func validateSubnetInfo(si *crdv1beta1.SubnetInfo, ranges []externalippool.Range, ok []bool, path, rangesPath *field.Path) field.ErrorList {
	gw, err := netip.ParseAddr(si.Gateway)
	if err != nil || gw.Zone() != "" {
		return field.ErrorList{field.Invalid(path.Child("gateway"), si.Gateway, "not an IP address")}
	}
	gw = gw.Unmap()
	if si.PrefixLength < 1 || int(si.PrefixLength) >= gw.BitLen() {
		return field.ErrorList{field.Invalid(path.Child("prefixLength"), si.PrefixLength,
			fmt.Sprintf("must be between 1 and %d for gateway %s", gw.BitLen()-1, gw))}
	}
	var errs field.ErrorList
	if si.VLAN < 0 || si.VLAN > 4094 {
		errs = append(errs, field.Invalid(path.Child("vlan"), si.VLAN, "must be between 0 and 4094"))
	}
	subnet := netip.PrefixFrom(gw, int(si.PrefixLength)).Masked()
	for i, r := range ranges {
		if ok[i] && (!subnet.Contains(r.First) || !subnet.Contains(r.Last)) {
			errs = append(errs, field.Invalid(rangesPath.Index(i), r.String(),
				fmt.Sprintf("is not in the subnet %s of subnetInfo", subnet)))
		}
	}
	return errs
}

// ValidateExternalIPPoolDelete refuses to delete a pool an Egress or a
// LoadBalancer Service holds an IP of.
func (v *EgressValidator) ValidateExternalIPPoolDelete(ctx context.Context, p *crdv1beta1.ExternalIPPool) field.ErrorList {
	held, err := v.holders(ctx, p.Name)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata", "name"), err)}
	}
	if len(held) > 0 {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"),
			fmt.Sprintf("ExternalIPPool %s is in use: %s holds its IP %s", p.Name, held[0].holder, held[0].ip))}
	}
	return nil
}

// ValidateEgress refuses an Egress with both egressIP and egressIPs (or
// externalIPPool and externalIPPools), a bad IP, an egressIP outside its
// named pool (or with a pool that does not exist), bad selectors and a bad
// bandwidth.
func (v *EgressValidator) ValidateEgress(ctx context.Context, eg *crdv1beta1.Egress) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := eg.Spec
	if s.EgressIP != "" && len(s.EgressIPs) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("egressIPs"), "cannot be set with egressIP"))
	}
	if s.ExternalIPPool != "" && len(s.ExternalIPPools) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("externalIPPools"), "cannot be set with externalIPPool"))
	}
	if len(s.EgressIPs) > 0 && len(s.ExternalIPPools) > 0 && len(s.EgressIPs) != len(s.ExternalIPPools) {
		errs = append(errs, field.Invalid(spec.Child("egressIPs"), s.EgressIPs,
			fmt.Sprintf("has %d entries, externalIPPools %d: entries of the same index go together", len(s.EgressIPs), len(s.ExternalIPPools))))
	}
	seen := map[string]int{}
	for i, p := range s.ExternalIPPools {
		if j, dup := seen[p]; dup {
			errs = append(errs, field.Duplicate(spec.Child("externalIPPools").Index(i), fmt.Sprintf("%s (as externalIPPools[%d])", p, j)))
		}
		seen[p] = i
	}
	if s.EgressIP != "" {
		errs = append(errs, v.ipInPool(ctx, s.EgressIP, s.ExternalIPPool, spec.Child("egressIP"))...)
	} else if s.ExternalIPPool == "" && len(s.EgressIPs) == 0 && len(s.ExternalIPPools) == 0 {
		errs = append(errs, field.Required(spec.Child("egressIP"), "egressIP or externalIPPool (or egressIPs or externalIPPools) must be set"))
	}
	for i, ip := range s.EgressIPs {
		if ip == "" {
			continue
		}
		pool := ""
		if i < len(s.ExternalIPPools) {
			pool = s.ExternalIPPools[i]
		}
		errs = append(errs, v.ipInPool(ctx, ip, pool, spec.Child("egressIPs").Index(i))...)
	}
	at := spec.Child("appliedTo")
	for _, sel := range []struct {
		name string
		ls   *metav1.LabelSelector
	}{{"podSelector", s.AppliedTo.PodSelector}, {"namespaceSelector", s.AppliedTo.NamespaceSelector}} {
		if sel.ls == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(sel.ls); err != nil {
			errs = append(errs, field.Invalid(at.Child(sel.name), sel.ls, err.Error()))
		}
	}
	if bw := s.Bandwidth; bw != nil {
		for _, q := range []struct{ name, value string }{{"rate", bw.Rate}, {"burst", bw.Burst}} {
			if _, err := crdv1beta1.KbitsOf(q.value); err != nil {
				errs = append(errs, field.Invalid(spec.Child("bandwidth", q.name), q.value, err.Error()))
			}
		}
	}
	return errs
}

// ipInPool refuses a bad IP, and one not in the named pool (or whose pool
// does not exist).
func (v *EgressValidator) ipInPool(ctx context.Context, s, pool string, path *field.Path) field.ErrorList {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return field.ErrorList{field.Invalid(path, s, "not an IP address")}
	}
	if pool == "" {
		return nil
	}
	p, err := v.lookup.ExternalIPPool(ctx, pool)
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	if p == nil {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("ExternalIPPool %s does not exist", pool))}
	}
	ranges, err := externalippool.ParseRanges(p.Spec)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("ExternalIPPool %s has a bad range: %v", pool, err))}
	}
	for _, r := range ranges {
		if r.Contains(ip) {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("is not within the IP ranges of ExternalIPPool %s", pool))}
}

// informerIPLookup answers from the informers' caches, and asks
// kube-apiserver for a pool the cache does not hold yet (created just
// before the Egress that names it).
type informerIPLookup struct {
	client   versioned.Interface
	pools    crdlisters.ExternalIPPoolLister
	egresses cache.Indexer
	services cache.Indexer
}

// egressPoolIndex indexes Egresses by their externalIPPool, and Services by
// the pool their annotation names.
const egressPoolIndex = "externalIPPool"

// NewInformerIPLookup adds the indexes it needs to the Egress and Service
// informers (before they start) and returns an IPLookup reading the informers.
func NewInformerIPLookup(client versioned.Interface, pools crdinformers.ExternalIPPoolInformer, egresses crdinformers.EgressInformer,
	services coreinformers.ServiceInformer) (IPLookup, error) {
	err := egresses.Informer().AddIndexers(cache.Indexers{egressPoolIndex: func(obj any) ([]string, error) {
		eg, ok := obj.(*crdv1beta1.Egress)
		if !ok {
			return nil, nil
		}
		var pools []string
		if eg.Spec.ExternalIPPool != "" {
			pools = append(pools, eg.Spec.ExternalIPPool)
		}
		return append(pools, eg.Spec.ExternalIPPools...), nil
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the %s index: %w", egressPoolIndex, err)
	}
	err = services.Informer().AddIndexers(cache.Indexers{egressPoolIndex: func(obj any) ([]string, error) {
		if svc, ok := obj.(*corev1.Service); ok {
			if p := svc.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]; p != "" {
				return []string{p}, nil
			}
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the Service %s index: %w", egressPoolIndex, err)
	}
	return &informerIPLookup{client: client, pools: pools.Lister(), egresses: egresses.Informer().GetIndexer(),
		services: services.Informer().GetIndexer()}, nil
}

func (l *informerIPLookup) ExternalIPPool(ctx context.Context, name string) (*crdv1beta1.ExternalIPPool, error) {
	p, err := l.pools.Get(name)
	return orLive(p, err, func() (*crdv1beta1.ExternalIPPool, error) {
		return l.client.CrdV1beta1().ExternalIPPools().Get(ctx, name, metav1.GetOptions{})
	})
}

func (l *informerIPLookup) ExternalIPPools(context.Context) ([]*crdv1beta1.ExternalIPPool, error) {
	return l.pools.List(labels.Everything())
}

func (l *informerIPLookup) EgressesOfPool(_ context.Context, pool string) ([]*crdv1beta1.Egress, error) {
	objs, err := l.egresses.ByIndex(egressPoolIndex, pool)
	if err != nil {
		return nil, err
	}
	out := make([]*crdv1beta1.Egress, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*crdv1beta1.Egress))
	}
	return out, nil
}

func (l *informerIPLookup) ServicesOfPool(_ context.Context, pool string) ([]*corev1.Service, error) {
	objs, err := l.services.ByIndex(egressPoolIndex, pool)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Service, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Service))
	}
	return out, nil
}
