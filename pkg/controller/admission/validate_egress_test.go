package admission

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

type fakeIPLookup struct {
	pools    []*crdv1beta1.ExternalIPPool
	egresses []*crdv1beta1.Egress
	services []*corev1.Service
}

func (f *fakeIPLookup) ServicesOfPool(_ context.Context, pool string) ([]*corev1.Service, error) {
	var out []*corev1.Service
	for _, s := range f.services {
		if s.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey] == pool {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeIPLookup) ExternalIPPool(_ context.Context, name string) (*crdv1beta1.ExternalIPPool, error) {
	for _, p := range f.pools {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, nil
}

func (f *fakeIPLookup) ExternalIPPools(context.Context) ([]*crdv1beta1.ExternalIPPool, error) {
	return f.pools, nil
}

func (f *fakeIPLookup) EgressesOfPool(_ context.Context, pool string) ([]*crdv1beta1.Egress, error) {
	var out []*crdv1beta1.Egress
	for _, e := range f.egresses {
		if e.Spec.ExternalIPPool == pool || slices.Contains(e.Spec.ExternalIPPools, pool) {
			out = append(out, e)
		}
	}
	return out, nil
}

func pool(name string, ranges ...crdv1beta1.IPRange) *crdv1beta1.ExternalIPPool {
	return &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: ranges}}
}

func egress(name, ip, poolName string) *crdv1beta1.Egress {
	return &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.EgressSpec{
		AppliedTo: crdv1beta1.EgressAppliedTo{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		EgressIP:  ip, ExternalIPPool: poolName}}
}

// dualEgress holds 10.30.0.5 of pool v4 and none yet of pool v6.
func dualEgress() *crdv1beta1.Egress {
	e := egress("dual", "", "")
	e.Spec.ExternalIPPools, e.Spec.EgressIPs = []string{"v4", "v6"}, []string{"10.30.0.5", ""}
	return e
}

// lbService is a Service of type typ annotated with poolName whose status
// has the ingress ip.
func lbService(name string, typ corev1.ServiceType, poolName, ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Annotations: map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: poolName}},
		Spec:   corev1.ServiceSpec{Type: typ},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}}}
}

func newEgressValidator() *EgressValidator {
	return NewEgressValidator(&fakeIPLookup{
		pools: []*crdv1beta1.ExternalIPPool{pool("prod", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.10"}, crdv1beta1.IPRange{CIDR: "10.10.1.0/28"}),
			pool("lb", crdv1beta1.IPRange{CIDR: "10.50.0.0/28"})},
		egresses: []*crdv1beta1.Egress{egress("web", "10.10.0.9", "prod"), egress("pending", "", "prod"),
			egress("static", "10.20.0.1", ""), dualEgress()},
		services: []*corev1.Service{lbService("web-lb", corev1.ServiceTypeLoadBalancer, "lb", "10.50.0.3"),
			lbService("was-lb", corev1.ServiceTypeClusterIP, "lb-old", "10.60.0.3")},
	})
}

// wantErrors checks that errs name exactly the fields of want, each with its text.
func wantErrors(t *testing.T, errs field.ErrorList, want map[string]string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(want), errs)
	}
	for _, e := range errs {
		text, ok := want[e.Field]
		if !ok || !strings.Contains(e.Error(), text) {
			t.Errorf("unexpected error %q (want on %v)", e.Error(), want)
		}
	}
}

func TestValidateExternalIPPool(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pool *crdv1beta1.ExternalIPPool
		old  bool
		want map[string]string
	}{
		{name: "upstream's example is accepted", pool: pool("staging", crdv1beta1.IPRange{Start: "10.10.2.2", End: "10.10.2.10"}, crdv1beta1.IPRange{CIDR: "fd00:10::/120"})},
		{name: "start after end is refused naming end", pool: pool("p", crdv1beta1.IPRange{Start: "10.30.0.9", End: "10.30.0.1"}),
			want: map[string]string{"spec.ipRanges[0].end": "is before start"}},
		{name: "mixed families are refused", pool: pool("p", crdv1beta1.IPRange{Start: "10.30.0.1", End: "fd00::9"}),
			want: map[string]string{"spec.ipRanges[0].end": "not of the same IP family"}},
		{name: "a bad CIDR is refused naming cidr", pool: pool("p", crdv1beta1.IPRange{CIDR: "10.30.0.0/40"}),
			want: map[string]string{"spec.ipRanges[0].cidr": "is not a CIDR"}},
		{name: "ranges overlapping each other are refused", pool: pool("p", crdv1beta1.IPRange{CIDR: "10.30.0.0/24"}, crdv1beta1.IPRange{Start: "10.30.0.200", End: "10.30.1.5"}),
			want: map[string]string{"spec.ipRanges[1]": "overlaps ipRanges[0]"}},
		{name: "a range overlapping another pool is refused naming the pool", pool: pool("p", crdv1beta1.IPRange{Start: "10.10.1.10", End: "10.10.1.20"}),
			want: map[string]string{"spec.ipRanges[0]": "of ExternalIPPool prod"}},
		{name: "a pool may keep its own ranges on update", pool: pool("prod", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.10"}), old: true},
		{name: "an update leaving out an IP an Egress holds is refused", pool: pool("prod", crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.5"}), old: true,
			want: map[string]string{"spec.ipRanges": "IP 10.10.0.9 allocated to Egress web"}},
		{name: "an update leaving out an IP a LoadBalancer Service holds is refused naming the Service", pool: pool("lb", crdv1beta1.IPRange{Start: "10.50.0.4", End: "10.50.0.9"}), old: true,
			want: map[string]string{"spec.ipRanges": "IP 10.50.0.3 allocated to Service ns/web-lb (status.loadBalancer.ingress)"}},
		{name: "ranges outside subnetInfo are refused", pool: func() *crdv1beta1.ExternalIPPool {
			p := pool("p", crdv1beta1.IPRange{Start: "10.40.0.2", End: "10.40.1.10"})
			p.Spec.SubnetInfo = &crdv1beta1.SubnetInfo{Gateway: "10.40.0.1", PrefixLength: 24, VLAN: 10}
			return p
		}(), want: map[string]string{"spec.ipRanges[0]": "not in the subnet 10.40.0.0/24"}},
		{name: "a bad gateway is refused", pool: func() *crdv1beta1.ExternalIPPool {
			p := pool("p", crdv1beta1.IPRange{Start: "10.40.0.2", End: "10.40.0.10"})
			p.Spec.SubnetInfo = &crdv1beta1.SubnetInfo{Gateway: "10.40.0", PrefixLength: 24}
			return p
		}(), want: map[string]string{"spec.subnetInfo.gateway": "not an IP address"}},
		{name: "a pool without ranges is refused", pool: pool("p"), want: map[string]string{"spec.ipRanges": "at least one IP range"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old *crdv1beta1.ExternalIPPool
			if tc.old {
				old = newEgressValidator().lookup.(*fakeIPLookup).pools[0]
			}
			wantErrors(t, newEgressValidator().ValidateExternalIPPool(ctx, tc.pool, old), tc.want)
		})
	}
}

func TestDeletingAPoolInUseIsRefused(t *testing.T) {
	v := newEgressValidator()
	wantErrors(t, v.ValidateExternalIPPoolDelete(context.Background(), pool("prod")),
		map[string]string{"metadata.name": "Egress web holds its IP 10.10.0.9"})
	wantErrors(t, v.ValidateExternalIPPoolDelete(context.Background(), pool("unused")), nil)
	wantErrors(t, v.ValidateExternalIPPoolDelete(context.Background(), pool("v4")),
		map[string]string{"metadata.name": "Egress dual holds its IP 10.30.0.5"})
	wantErrors(t, v.ValidateExternalIPPoolDelete(context.Background(), pool("v6")), nil)
	wantErrors(t, v.ValidateExternalIPPoolDelete(context.Background(), pool("lb")),
		map[string]string{"metadata.name": "Service ns/web-lb (status.loadBalancer.ingress) holds its IP 10.50.0.3"})
	// A Service that is no longer a LoadBalancer holds nothing.
	wantErrors(t, v.ValidateExternalIPPoolDelete(context.Background(), pool("lb-old")), nil)
}

func TestValidateEgress(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		eg   *crdv1beta1.Egress
		want map[string]string
	}{
		{name: "an egressIP in its pool is accepted", eg: egress("e", "10.10.1.3", "prod")},
		{name: "a pool without an IP is accepted", eg: egress("e", "", "prod")},
		{name: "a static egressIP is accepted", eg: egress("e", "192.168.7.7", "")},
		{name: "an egressIP outside its pool is refused naming egressIP", eg: egress("e", "10.10.1.15", "prod"),
			want: map[string]string{"spec.egressIP": "not within the IP ranges of ExternalIPPool prod"}},
		{name: "an egressIP with a missing pool is refused", eg: egress("e", "10.10.1.3", "nope"),
			want: map[string]string{"spec.egressIP": "ExternalIPPool nope does not exist"}},
		{name: "a bad egressIP is refused", eg: egress("e", "10.10.1", ""), want: map[string]string{"spec.egressIP": "not an IP address"}},
		{name: "egressIP and egressIPs together are refused", eg: func() *crdv1beta1.Egress {
			e := egress("e", "192.168.7.7", "")
			e.Spec.EgressIPs = []string{"192.168.7.8"}
			return e
		}(), want: map[string]string{"spec.egressIPs": "cannot be set with egressIP"}},
		{name: "externalIPPool and externalIPPools together are refused", eg: func() *crdv1beta1.Egress {
			e := egress("e", "", "prod")
			e.Spec.ExternalIPPools = []string{"prod"}
			return e
		}(), want: map[string]string{"spec.externalIPPools": "cannot be set with externalIPPool"}},
		{name: "neither an IP nor a pool is refused", eg: egress("e", "", ""), want: map[string]string{"spec.egressIP": "must be set"}},
		{name: "a bad selector is refused naming it", eg: func() *crdv1beta1.Egress {
			e := egress("e", "", "prod")
			e.Spec.AppliedTo.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}
			return e
		}(), want: map[string]string{"spec.appliedTo.namespaceSelector": "not a valid label selector operator"}},
		{name: "a bad bandwidth is refused naming rate", eg: func() *crdv1beta1.Egress {
			e := egress("e", "", "prod")
			e.Spec.Bandwidth = &crdv1beta1.Bandwidth{Rate: "fast", Burst: "2G"}
			return e
		}(), want: map[string]string{"spec.bandwidth.rate": "must be a quantity"}},
		{name: "a burst below the meter's 1k is refused naming burst", eg: func() *crdv1beta1.Egress {
			e := egress("e", "", "prod")
			e.Spec.Bandwidth = &crdv1beta1.Bandwidth{Rate: "10M", Burst: "500"}
			return e
		}(), want: map[string]string{"spec.bandwidth.burst": "from 1k to 4T"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErrors(t, newEgressValidator().ValidateEgress(ctx, tc.eg), tc.want)
		})
	}
}

func TestTheEgressWebhooksAnswerKubeAPIServer(t *testing.T) {
	h := EgressHandlers(newEgressValidator())
	for path, want := range map[string]bool{PathValidateEgress: true, PathValidateExternalIPPool: true} {
		if _, ok := h[path]; ok != want {
			t.Errorf("no handler at %s", path)
		}
	}
	resp := reviewWith(t, h[PathValidateExternalIPPool], admissionv1.Delete, "ExternalIPPool", pool("prod"))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "metadata.name") {
		t.Errorf("deleting a pool in use: %+v", resp)
	}
	resp = reviewWith(t, h[PathValidateEgress], admissionv1.Create, "Egress", egress("e", "10.10.1.15", "prod"))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.egressIP") {
		t.Errorf("an IP outside its pool: %+v", resp)
	}
}
