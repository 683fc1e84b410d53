package app

import (
	"context"
	"net/netip"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/agent/bgp"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupBGPPolicy runs the BGP speaker of the BGPPolicy in effect on this
// Node (pkg/agent/bgp, feature gate BGPPolicy): it advertises the Node's
// Pod CIDRs, Service IPs and held Egress IPs to the policy's peers, and
// serves /bgppolicy, /bgppeers and /bgproutes on the agent API.
func setupBGPPolicy(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.BGPPolicy] {
		return nil, nil
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	f := crdinformers.NewSharedInformerFactory(crd, 0)
	policies := f.Crd().V1alpha1().BGPPolicies()
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "kube-system"
	}
	// Only the passwords' Secret: the agent may read no other.
	secretsF := informers.NewSharedInformerFactoryWithOptions(d.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", crdv1alpha1.BGPPasswordsSecret).String()
		}))
	secrets := secretsF.Core().V1().Secrets()
	services, nodes := d.informers.Core().V1().Services(), d.informers.Core().V1().Nodes()
	slices := d.informers.Discovery().V1().EndpointSlices()
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events("")})
	var podCIDRs []netip.Prefix
	for _, c := range d.podCIDRs {
		podCIDRs = append(podCIDRs, prefixOf(c))
	}
	nodeIP, _ := netip.AddrFromSlice(d.nc.NodeIP.IP)
	cfg := bgp.Config{NodeName: d.o.NodeName, NodeIP: nodeIP.Unmap(), PodCIDRs: podCIDRs,
		Policies: policies.Lister(), Nodes: nodes.Lister(), Services: services.Lister(), Slices: slices.Lister(),
		Secrets: secrets.Lister().Secrets(ns),
		Informers: []cache.SharedIndexInformer{policies.Informer(), nodes.Informer(), services.Informer(),
			slices.Informer(), secrets.Informer()},
		Recorder: events.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: d.o.NodeName}),
		Speaker:  bgp.NewGoBGP()}
	if d.egress != nil {
		cfg.Egress = d.egress
	}
	c := bgp.NewController(cfg)
	if d.egress != nil {
		d.egress.AddHeldListener(c.Trigger)
	}
	for path, h := range c.Handlers() {
		d.api.handle(path, h)
	}
	f.Start(ctx.Done())
	secretsF.Start(ctx.Done())
	d.informers.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		c.Run(ctx)
		f.Shutdown()
		secretsF.Shutdown()
		events.Shutdown()
	}), nil
}
