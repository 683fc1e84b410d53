// Package controllerclient is the agent's client of antrea-controller's
// controlplane API that dials the controller directly instead of going
// through kube-apiserver's aggregation layer (docs/design/controlplane-api.md,
// "How agents connect").
//
// Two parts:
//   - Source follows where the controller is and which CA verifies it: the
//     ConfigMap kube-system/antrea-ca (key ca.crt, written by the controller)
//     and the ready endpoints of the Service kube-system/antrea (its
//     EndpointSlices; an ExternalName Service's name when it is one, as next
//     to kube-apiserver on loopback). One Source serves every client of a
//     process: three small watches of kube-apiserver, whatever the number of
//     clients.
//   - Transport is one client's connections: it sends each request to the
//     Source's current address, verifies the server for
//     antrea.kube-system.svc with the current CA, and closes its connections
//     when either changes, so open watches end and are made again against the
//     new controller without an agent restart.
//
// Config builds a rest.Config of a Transport that authenticates with the
// agent's ServiceAccount token (a token file is read again as client-go
// does, so bound tokens rotate); the controller checks it by TokenReview and
// authorizes the request by SubjectAccessReview.
package controllerclient

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// Target is where the controller is and what verifies it. A Target is never
// changed: a change is a new Target.
type Target struct {
	// Address is host:port of the controller's secure port.
	Address string
	// CA is the PEM of the controller's serving CA.
	CA   []byte
	pool *x509.CertPool
}

// Source follows the controller's address and CA.
type Source struct {
	namespace, service, configMap string

	cmInformer, svcInformer, sliceInformer cache.SharedIndexInformer

	mu        sync.Mutex // serializes update and guards subs
	subs      []func()
	target    atomic.Pointer[Target]
	lastError string
	ready     chan struct{}
}

// NewSource follows the controller of the usual Namespace, Service and
// ConfigMap (package controlplane's names) through kube.
func NewSource(kube kubernetes.Interface) *Source {
	return NewSourceFor(kube, controlplane.ControllerNamespace, controlplane.ControllerServiceName, controlplane.CAConfigMapName)
}

// NewSourceFor follows the controller behind Service namespace/service whose
// CA is in ConfigMap namespace/configMap.
func NewSourceFor(kube kubernetes.Interface, namespace, service, configMap string) *Source {
	s := &Source{namespace: namespace, service: service, configMap: configMap, ready: make(chan struct{})}
	byName := func(name string) func(*metav1.ListOptions) {
		return func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}
	}
	factory := func(tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace), informers.WithTweakListOptions(tweak))
	}
	s.cmInformer = factory(byName(configMap)).Core().V1().ConfigMaps().Informer()
	s.svcInformer = factory(byName(service)).Core().V1().Services().Informer()
	s.sliceInformer = factory(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{discoveryv1.LabelServiceName: service}.String()
	}).Discovery().V1().EndpointSlices().Informer()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.update() },
		UpdateFunc: func(_, _ any) { s.update() },
		DeleteFunc: func(any) { s.update() },
	}
	for _, inf := range []cache.SharedIndexInformer{s.cmInformer, s.svcInformer, s.sliceInformer} {
		// The handler only recomputes from the informers' stores: it
		// cannot fail to register on an informer not yet started.
		_, _ = inf.AddEventHandler(h)
	}
	return s
}

// Run watches until ctx ends.
func (s *Source) Run(ctx context.Context) {
	for _, inf := range []cache.SharedIndexInformer{s.cmInformer, s.svcInformer, s.sliceInformer} {
		go inf.RunWithContext(ctx)
	}
	// An empty list (no EndpointSlice for an ExternalName Service) calls
	// no handler: compute once all three are synced.
	if cache.WaitForCacheSync(ctx.Done(), s.cmInformer.HasSynced, s.svcInformer.HasSynced, s.sliceInformer.HasSynced) {
		s.update()
	}
	<-ctx.Done()
}

// Target is the controller's current address and CA, nil while either is
// unknown.
func (s *Source) Target() *Target { return s.target.Load() }

// Ready is closed once a Target is first known.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// onChange calls f (without waiting) after every change of the Target.
func (s *Source) onChange(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, f)
}

// update recomputes the Target from the informers' stores.
func (s *Source) update() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, inf := range []cache.SharedIndexInformer{s.cmInformer, s.svcInformer, s.sliceInformer} {
		if !inf.HasSynced() {
			// Not every store is filled yet: the last one's sync calls
			// update again (every listed object is an Add).
			return
		}
	}
	old := s.target.Load()
	next, err := s.compute(old)
	if err != nil {
		if msg := err.Error(); msg != s.lastError {
			if old == nil {
				klog.InfoS("antrea-controller not reachable directly yet", "reason", msg)
			} else {
				klog.InfoS("Keeping antrea-controller's last address and CA", "address", old.Address, "reason", msg)
			}
			s.lastError = msg
		}
		// The last good Target stays: a ConfigMap or Service being
		// re-created does not cut the agents off.
		return
	}
	s.lastError = ""
	if old != nil && old.Address == next.Address && string(old.CA) == string(next.CA) {
		return
	}
	s.target.Store(next)
	klog.InfoS("antrea-controller's address or CA changed", "address", next.Address, "caChanged", old == nil || string(old.CA) != string(next.CA))
	if old == nil {
		close(s.ready)
	}
	for _, f := range s.subs {
		f()
	}
}

// compute makes the Target, keeping old's address while it is still one of
// the ready endpoints.
func (s *Source) compute(old *Target) (*Target, error) {
	cm, err := s.get(s.cmInformer, s.configMap, "ConfigMap")
	if err != nil {
		return nil, err
	}
	ca := []byte(cm.(*corev1.ConfigMap).Data[controlplane.CAConfigMapKey])
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("ConfigMap %s/%s: key %s holds no PEM certificate", s.namespace, s.configMap, controlplane.CAConfigMapKey)
	}
	obj, err := s.get(s.svcInformer, s.service, "Service")
	if err != nil {
		return nil, err
	}
	svc := obj.(*corev1.Service)
	if len(svc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("service %s/%s: spec.ports is empty", s.namespace, s.service)
	}
	var addrs []string
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		// Next to kube-apiserver on loopback (apiserver.LoopbackRegistration)
		// the Service names the host and the port is the controller's.
		addrs = []string{net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(svc.Spec.Ports[0].Port)))}
	} else {
		addrs = readyAddresses(s.sliceInformer.GetStore().List(), svc.Spec.Ports[0].Name)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ready endpoint", s.namespace, s.service)
	}
	addr := addrs[0]
	if old != nil && slices.Contains(addrs, old.Address) {
		addr = old.Address
	}
	return &Target{Address: addr, CA: ca, pool: pool}, nil
}

func (s *Source) get(inf cache.SharedIndexInformer, name, kind string) (runtime.Object, error) {
	obj, ok, err := inf.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no %s %s/%s", kind, s.namespace, name)
	}
	return obj.(runtime.Object), nil
}

// readyAddresses lists, sorted, host:port of every ready endpoint of the
// slices, with the port of the slices named portName (the Service port's
// name; the only port when the slice has one).
func readyAddresses(objs []any, portName string) []string {
	var out []string
	for _, o := range objs {
		slice := o.(*discoveryv1.EndpointSlice)
		port := int32(0)
		for _, p := range slice.Ports {
			if p.Port != nil && ((p.Name != nil && *p.Name == portName) || len(slice.Ports) == 1) {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range slice.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
