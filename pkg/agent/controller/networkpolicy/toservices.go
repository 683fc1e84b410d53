package networkpolicy

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	agenttypes "antrea.io/antrea/pkg/agent/types"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// toServices: an Antrea-native egress rule's `toServices` (upstream's
// field) names Services; the rule matches the connections the applied-to
// pods open to those Services' ClusterIPs and ports, whichever endpoint
// AntreaProxy picks, and not the same endpoints reached by their pod IPs.
// The controller sends the Services' names; the agent resolves them here
// from its Service informer and recomputes a policy when one of its
// Services changes (a ClusterIP assigned, a port added).

// ServiceLookup resolves the Services of toServices rules (Options.Services).
type ServiceLookup interface {
	// Frontends are the ClusterIPs and ports of Service namespace/name:
	// none while it is unknown or headless.
	Frontends(namespace, name string) []agentof.ServicePort
	// FrontendsAt are the frontends of the Services whose ClusterIP is ip
	// (a toFQDN rule's name that answered a ClusterIP: fqdnservices.go),
	// each with the name of the endpoints' port it leads to.
	FrontendsAt(ip netip.Addr) []ServiceFrontend
	// OnChange registers f, called with a Service's namespace and name
	// whenever it is added, changed or deleted.
	OnChange(f func(namespace, name string))
}

// ServiceFrontend is a Service's frontend with the name of the endpoints'
// port it leads to ("" for a numeric targetPort).
type ServiceFrontend struct {
	agentof.ServicePort
	TargetPortName string
}

// informerServices is a ServiceLookup on a Service informer.
type informerServices struct {
	lister   corelisters.ServiceLister
	informer cache.SharedIndexInformer
	// byIP is "namespace/name" of the Services at each ClusterIP, kept by
	// an event handler (the agent's informer runs already when the policy
	// controller starts, too late for an indexer).
	mu   sync.RWMutex
	byIP map[netip.Addr]sets.Set[string]
}

// NewServiceLookup serves toServices rules from inf (the agent's Service
// informer, which AntreaProxy shares).
func NewServiceLookup(inf coreinformers.ServiceInformer) ServiceLookup {
	s := &informerServices{lister: inf.Lister(), informer: inf.Informer(), byIP: map[netip.Addr]sets.Set[string]{}}
	index := func(svc *corev1.Service, add bool) {
		key := svc.Namespace + "/" + svc.Name
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, a := range agenttypes.ServiceClusterIPs(svc) {
			if add {
				indexAdd(s.byIP, a, key)
			} else {
				indexDel(s.byIP, a, key)
			}
		}
	}
	asService := func(obj any) *corev1.Service {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		svc, _ := obj.(*corev1.Service)
		return svc
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if svc := asService(obj); svc != nil {
				index(svc, true)
			}
		},
		UpdateFunc: func(old, obj any) {
			if svc := asService(old); svc != nil {
				index(svc, false)
			}
			if svc := asService(obj); svc != nil {
				index(svc, true)
			}
		},
		DeleteFunc: func(obj any) {
			if svc := asService(obj); svc != nil {
				index(svc, false)
			}
		},
	}); err != nil {
		klog.ErrorS(err, "Cannot index Services by ClusterIP: toFQDN rules will not match Services' names")
	}
	return s
}

func (s *informerServices) FrontendsAt(ip netip.Addr) []ServiceFrontend {
	ip = ip.Unmap()
	s.mu.RLock()
	keys := sets.List(s.byIP[ip])
	s.mu.RUnlock()
	var out []ServiceFrontend
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		if svc, err := s.lister.Services(ns).Get(name); err == nil {
			out = append(out, frontendsAt(svc, ip)...)
		}
	}
	return out
}

// frontendsAt are the frontends of svc at ClusterIP ip (none if ip is not
// one of its ClusterIPs).
func frontendsAt(svc *corev1.Service, ip netip.Addr) []ServiceFrontend {
	ip = ip.Unmap()
	if !slices.Contains(agenttypes.ServiceClusterIPs(svc), ip) {
		return nil
	}
	var out []ServiceFrontend
	for _, p := range svc.Spec.Ports {
		proto, ok := protocolNumber(cpv1beta2.Protocol(p.Protocol))
		if !ok || p.Port <= 0 || p.Port > 0xffff {
			continue
		}
		fe := ServiceFrontend{ServicePort: agentof.ServicePort{IP: ip, Protocol: proto, Port: uint16(p.Port)}}
		if p.TargetPort.Type == intstr.String {
			fe.TargetPortName = p.TargetPort.StrVal
		}
		out = append(out, fe)
	}
	return out
}

func (s *informerServices) Frontends(namespace, name string) []agentof.ServicePort {
	svc, err := s.lister.Services(namespace).Get(name)
	if err != nil {
		return nil
	}
	return serviceFrontends(svc)
}

func (s *informerServices) OnChange(f func(namespace, name string)) {
	notify := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if svc, ok := obj.(*corev1.Service); ok {
			f(svc.Namespace, svc.Name)
		}
	}
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		klog.ErrorS(err, "Cannot watch Services: toServices rules will not follow their changes")
	}
}

// serviceFrontends are a Service's ClusterIPs × ports; none for a
// headless Service (its clients reach the endpoints by their pod IPs).
func serviceFrontends(svc *corev1.Service) []agentof.ServicePort {
	var out []agentof.ServicePort
	for _, ip := range agenttypes.ServiceClusterIPs(svc) {
		for _, fe := range frontendsAt(svc, ip) {
			out = append(out, fe.ServicePort)
		}
	}
	return out
}

func compareFrontends(a, b agentof.ServicePort) int {
	return cmp.Or(a.IP.Compare(b.IP), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
}

// toServicesFrontendsLocked are the frontends of a rule's toServices,
// sorted and distinct (the pipeline keeps those of the node's families);
// nil without a ServiceLookup. c.mu is held (read).
func (c *ruleCache) toServicesFrontendsLocked(refs []cpv1beta2.ServiceReference) []agentof.ServicePort {
	if c.services == nil {
		return nil
	}
	var out []agentof.ServicePort
	for _, ref := range refs {
		out = append(out, c.services.Frontends(ref.Namespace, ref.Name)...)
	}
	slices.SortFunc(out, compareFrontends)
	return slices.Compact(out)
}

// policyServices are the "namespace/name" of the Services a policy's
// toServices rules name.
func policyServices(p *cpv1beta2.NetworkPolicy) sets.Set[string] {
	out := sets.New[string]()
	for _, r := range p.Rules {
		for _, ref := range r.To.ToServices {
			out.Insert(ref.Namespace + "/" + ref.Name)
		}
	}
	return out
}

// policiesForService are the policies with a toServices rule naming
// Service namespace/name.
func (c *ruleCache) policiesForService(namespace, name string) sets.Set[string] {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byService[namespace+"/"+name].Clone()
}
