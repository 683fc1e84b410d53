// Package trafficcontrol realizes TrafficControl (crd.antrea.io/v1alpha2)
// on one Node: the traffic the Node's Pods a TrafficControl selects send
// (Egress) or receive (Ingress) is copied (Mirror) or diverted (Redirect) to
// its target port, and redirected traffic comes back through its return
// port (docs/traffic-control.md). The controller resolves the selected Pods
// to their OVS ports, makes the target and return ports on br-int (an OVS
// internal port, an existing device attached, or a Geneve, VXLAN, GRE or
// ERSPAN tunnel to a collector), writes the OpenFlow client's
// TrafficControl flows (pkg/agent/openflow, traffic_control.go), and removes
// the ports it made once no TrafficControl uses them. A port it cannot make
// is reported as a Warning Event on the TrafficControl, whose Pods then keep
// their traffic as without it.
package trafficcontrol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	crdv1alpha2 "antrea.io/antrea/pkg/apis/crd/v1alpha2"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// The ports this controller made or attached carry, in their external_ids,
// antrea-type=traffic-control: the ones it removes once no TrafficControl
// uses them, also after a restart.
var (
	PortTypeExternalID     = interfacestore.ExternalIDType
	PortTypeTrafficControl = interfacestore.TrafficControlInterface.String()
)

// Bridge is what the controller needs of br-int's OVSDB.
type Bridge interface {
	GetPortList(ctx context.Context) ([]ovsconfig.OVSPortData, error)
	CreatePortWithConfig(ctx context.Context, cfg ovsconfig.PortConfig) (string, error)
	DeletePort(ctx context.Context, portUUID string) error
	GetOFPort(ctx context.Context, ifName string) (int32, error)
}

// Flows is what the controller needs of the OpenFlow client.
type Flows interface {
	SetTrafficControlFlows(ctx context.Context, want agentof.TrafficControlFlows) error
}

// Config is the controller's inputs.
type Config struct {
	// TrafficControls, Pods (this Node's) and Namespaces are informers.
	TrafficControls, Pods, Namespaces cache.SharedIndexInformer
	Interfaces                        interfacestore.InterfaceStore
	Bridge                            Bridge
	Flows                             Flows
	// Purge drops the datapath's cached flows after a change, so packets
	// of known shapes take the new path at once (nil: none).
	Purge func(ctx context.Context) error
	// Recorder reports a port that cannot be made (nil: logs only).
	Recorder record.EventRecorder
}

// Controller is the TrafficControl controller of one Node.
type Controller struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[string]
	// written is the state last written (nil before the first write): a
	// sync that wants the same (most Pod events on the Node) writes no
	// flow and purges no datapath cache.
	written *agentof.TrafficControlFlows
}

const syncKey = "all"

// NewController wires the controller to its informers.
func NewController(cfg Config) *Controller {
	c := &Controller{cfg: cfg, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "trafficcontrol"})}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(syncKey) },
		UpdateFunc: func(any, any) { c.queue.Add(syncKey) },
		DeleteFunc: func(any) { c.queue.Add(syncKey) },
	}
	for _, inf := range []cache.SharedIndexInformer{cfg.TrafficControls, cfg.Pods, cfg.Namespaces} {
		_, _ = inf.AddEventHandler(h)
	}
	return c
}

// Run syncs until ctx ends. Everything is synced at once: the rules of
// every TrafficControl on this Node form one desired state.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.cfg.TrafficControls.HasSynced, c.cfg.Pods.HasSynced, c.cfg.Namespaces.HasSynced) {
		return
	}
	c.queue.Add(syncKey)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		if err := c.Sync(ctx); err != nil {
			klog.ErrorS(err, "TrafficControl sync failed; retrying")
			c.queue.AddRateLimited(key)
		} else {
			c.queue.Forget(key)
		}
		c.queue.Done(key)
	}
}

// portSpec is a target or return port as OVSDB holds it.
type portSpec struct {
	name    string
	ifType  string
	options map[string]string
}

// Sync makes the Node's TrafficControl ports and flows those the
// TrafficControls ask for.
func (c *Controller) Sync(ctx context.Context) error {
	tcs := c.cfg.TrafficControls.GetStore().List()
	sort.Slice(tcs, func(i, j int) bool {
		return tcs[i].(*crdv1alpha2.TrafficControl).Name < tcs[j].(*crdv1alpha2.TrafficControl).Name
	})
	existing, err := c.cfg.Bridge.GetPortList(ctx)
	if err != nil {
		return fmt.Errorf("list br-int's ports: %w", err)
	}
	byName := map[string]ovsconfig.OVSPortData{}
	for _, p := range existing {
		byName[p.Name] = p
	}
	nsLabels := map[string]labels.Set{}
	for _, o := range c.cfg.Namespaces.GetStore().List() {
		ns := o.(*corev1.Namespace)
		nsLabels[ns.Name] = ns.Labels
	}
	var want agentof.TrafficControlFlows
	used := map[string]bool{}
	var errs []error
	for _, o := range tcs {
		tc := o.(*crdv1alpha2.TrafficControl)
		ports, err := c.localPorts(tc, nsLabels)
		if err != nil {
			c.warn(tc, "InvalidAppliedTo", err.Error())
			continue
		}
		target, err := c.ensurePort(ctx, byName, tc.Spec.TargetPort, used)
		if err != nil {
			c.warn(tc, "TargetPortError", fmt.Sprintf("targetPort: %v", err))
			errs = append(errs, fmt.Errorf("TrafficControl %s: targetPort: %w", tc.Name, err))
			continue
		}
		rule := agentof.TrafficControlRule{Name: tc.Name, Ports: ports, Target: target,
			Redirect: tc.Spec.Action == crdv1alpha2.ActionRedirect,
			Ingress:  tc.Spec.Direction == crdv1alpha2.DirectionIngress || tc.Spec.Direction == crdv1alpha2.DirectionBoth,
			Egress:   tc.Spec.Direction == crdv1alpha2.DirectionEgress || tc.Spec.Direction == crdv1alpha2.DirectionBoth}
		if rule.Redirect && tc.Spec.ReturnPort != nil {
			ret, err := c.ensurePort(ctx, byName, *tc.Spec.ReturnPort, used)
			if err != nil {
				c.warn(tc, "ReturnPortError", fmt.Sprintf("returnPort: %v", err))
				errs = append(errs, fmt.Errorf("TrafficControl %s: returnPort: %w", tc.Name, err))
				continue
			}
			want.ReturnPorts = append(want.ReturnPorts, ret)
		}
		want.Rules = append(want.Rules, rule)
	}
	if c.written == nil || !reflect.DeepEqual(*c.written, want) {
		c.written = nil
		if err := c.cfg.Flows.SetTrafficControlFlows(ctx, want); err != nil {
			return fmt.Errorf("write TrafficControl flows: %w", err)
		}
		c.written = &want
		if c.cfg.Purge != nil {
			if err := c.cfg.Purge(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Could not purge the datapath flow cache after a TrafficControl change")
			}
		}
	}
	// The ports no TrafficControl uses any more, once no flow outputs to them.
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		p := byName[name]
		if p.ExternalIDs[PortTypeExternalID] != PortTypeTrafficControl || used[name] {
			continue
		}
		if err := c.cfg.Bridge.DeletePort(ctx, p.UUID); err != nil {
			errs = append(errs, fmt.Errorf("remove port %s: %w", name, err))
			continue
		}
		klog.InfoS("Removed a TrafficControl port no TrafficControl uses", "port", name)
	}
	// A port that cannot be made is reported and not retried: a change of
	// the TrafficControl (or a Pod) syncs again.
	if len(errs) > 0 {
		klog.ErrorS(errors.Join(errs...), "Some TrafficControls are not realized on this Node")
	}
	return nil
}

// localPorts are the OVS ports of the Node's Pods tc applies to, given the
// Namespaces' labels.
func (c *Controller) localPorts(tc *crdv1alpha2.TrafficControl, nsLabels map[string]labels.Set) ([]uint32, error) {
	podSel, nsSel := labels.Everything(), labels.Everything()
	var err error
	if s := tc.Spec.AppliedTo.PodSelector; s != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return nil, fmt.Errorf("appliedTo.podSelector: %w", err)
		}
	}
	if s := tc.Spec.AppliedTo.NamespaceSelector; s != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return nil, fmt.Errorf("appliedTo.namespaceSelector: %w", err)
		}
	}
	var out []uint32
	for _, o := range c.cfg.Pods.GetStore().List() {
		pod := o.(*corev1.Pod)
		l, ok := nsLabels[pod.Namespace]
		if !ok || !nsSel.Matches(l) || !podSel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		for _, iface := range c.cfg.Interfaces.GetContainerInterfacesByPod(pod.Name, pod.Namespace) {
			if iface.OVSPortConfig != nil && iface.OFPort > 0 {
				out = append(out, uint32(iface.OFPort))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// ensurePort makes (or finds) the port p names and returns its OpenFlow
// port number; used records it as in use.
func (c *Controller) ensurePort(ctx context.Context, byName map[string]ovsconfig.OVSPortData, p crdv1alpha2.TrafficControlPort, used map[string]bool) (uint32, error) {
	spec, err := specOf(p)
	if err != nil {
		return 0, err
	}
	if have, ok := byName[spec.name]; ok {
		switch {
		case have.ExternalIDs[PortTypeExternalID] != PortTypeTrafficControl:
			// A port someone else made: usable as a target only when it is
			// what was asked for (an internal port or a device of that
			// name), never a Pod's or Antrea's own.
			if have.ExternalIDs[PortTypeExternalID] != "" {
				return 0, fmt.Errorf("port %s on br-int belongs to Antrea (%s), not to TrafficControl",
					spec.name, have.ExternalIDs[PortTypeExternalID])
			}
			if have.IFType != spec.ifType {
				return 0, fmt.Errorf("port %s on br-int has type %q, not %q", spec.name, have.IFType, spec.ifType)
			}
		case have.IFType != spec.ifType || !maps.Equal(have.Options, spec.options):
			// Ours, with other parameters: made again.
			if err := c.cfg.Bridge.DeletePort(ctx, have.UUID); err != nil {
				return 0, fmt.Errorf("replace port %s: %w", spec.name, err)
			}
			delete(byName, spec.name)
		}
	}
	if _, ok := byName[spec.name]; !ok {
		uuid, err := c.cfg.Bridge.CreatePortWithConfig(ctx, ovsconfig.PortConfig{Name: spec.name, Type: spec.ifType,
			Options: spec.options, ExternalIDs: map[string]string{PortTypeExternalID: PortTypeTrafficControl}})
		if err != nil {
			return 0, err
		}
		byName[spec.name] = ovsconfig.OVSPortData{UUID: uuid, Name: spec.name, IFType: spec.ifType, Options: spec.options,
			ExternalIDs: map[string]string{PortTypeExternalID: PortTypeTrafficControl}}
	}
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ofPort, err := c.cfg.Bridge.GetOFPort(wait, spec.name)
	if err != nil {
		// Not used: a port of ours is removed at the end of the sync.
		return 0, err
	}
	used[spec.name] = true
	return uint32(ofPort), nil
}

// specOf is the OVS port a TrafficControlPort asks for: an internal port
// or a device by its name, a tunnel by a name derived from its parameters
// ("tc" + type initial + a hash, within the 15 characters of a device
// name), so that equal tunnels of several TrafficControls are one port.
func specOf(p crdv1alpha2.TrafficControlPort) (portSpec, error) {
	set := 0
	for _, b := range []bool{p.OVSInternal != nil, p.Device != nil, p.GENEVE != nil, p.VXLAN != nil, p.GRE != nil, p.ERSPAN != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return portSpec{}, fmt.Errorf("exactly one of ovsInternal, device, geneve, vxlan, gre, erspan must be set, got %d", set)
	}
	name := func(n string) error {
		if n == "" || len(n) > 15 {
			return fmt.Errorf("name %q: want 1 to 15 characters (a network device name)", n)
		}
		return nil
	}
	remote := func(ip string) error {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("remoteIP %q: not an IP address", ip)
		}
		return nil
	}
	opt := map[string]string{}
	var ifType string
	switch {
	case p.OVSInternal != nil:
		if err := name(p.OVSInternal.Name); err != nil {
			return portSpec{}, fmt.Errorf("ovsInternal.%w", err)
		}
		return portSpec{name: p.OVSInternal.Name, ifType: ovsconfig.InterfaceTypeInternal, options: map[string]string{}}, nil
	case p.Device != nil:
		if err := name(p.Device.Name); err != nil {
			return portSpec{}, fmt.Errorf("device.%w", err)
		}
		return portSpec{name: p.Device.Name, ifType: ovsconfig.InterfaceTypeSystem, options: map[string]string{}}, nil
	case p.GENEVE != nil || p.VXLAN != nil:
		t, field, ifType0 := p.GENEVE, "geneve", ovsconfig.InterfaceTypeGeneve
		if p.VXLAN != nil {
			t, field, ifType0 = p.VXLAN, "vxlan", ovsconfig.InterfaceTypeVXLAN
		}
		if err := remote(t.RemoteIP); err != nil {
			return portSpec{}, fmt.Errorf("%s.%w", field, err)
		}
		ifType, opt["remote_ip"] = ifType0, t.RemoteIP
		if t.VNI != nil {
			opt["key"] = strconv.Itoa(int(*t.VNI))
		}
		if t.DestinationPort != nil {
			opt["dst_port"] = strconv.Itoa(int(*t.DestinationPort))
		}
	case p.GRE != nil:
		if err := remote(p.GRE.RemoteIP); err != nil {
			return portSpec{}, fmt.Errorf("gre.%w", err)
		}
		ifType, opt["remote_ip"] = ovsconfig.InterfaceTypeGRE, p.GRE.RemoteIP
		if p.GRE.Key != nil {
			opt["key"] = strconv.Itoa(int(*p.GRE.Key))
		}
	case p.ERSPAN != nil:
		e := p.ERSPAN
		if err := remote(e.RemoteIP); err != nil {
			return portSpec{}, fmt.Errorf("erspan.%w", err)
		}
		if e.Version != 1 && e.Version != 2 {
			return portSpec{}, fmt.Errorf("erspan.version %d: want 1 or 2", e.Version)
		}
		ifType, opt["remote_ip"], opt["erspan_ver"] = ovsconfig.InterfaceTypeERSPAN, e.RemoteIP, strconv.Itoa(int(e.Version))
		if e.SessionID != nil {
			opt["key"] = strconv.Itoa(int(*e.SessionID))
		}
		if e.Version == 1 && e.Index != nil {
			opt["erspan_idx"] = strconv.FormatInt(int64(*e.Index), 16)
		}
		if e.Version == 2 {
			if e.Dir != nil {
				opt["erspan_dir"] = strconv.Itoa(int(*e.Dir))
			}
			if e.HardwareID != nil {
				opt["erspan_hwid"] = strconv.Itoa(int(*e.HardwareID))
			}
		}
	}
	h := sha256.New()
	h.Write([]byte(ifType))
	for _, k := range slices.Sorted(maps.Keys(opt)) {
		h.Write([]byte("\x00" + k + "=" + opt[k]))
	}
	return portSpec{name: "tc" + ifType[:1] + "-" + hex.EncodeToString(h.Sum(nil))[:10], ifType: ifType, options: opt}, nil
}

// warn reports what keeps tc from being realized on this Node.
func (c *Controller) warn(tc *crdv1alpha2.TrafficControl, reason, msg string) {
	klog.InfoS("TrafficControl not realized on this Node", "trafficControl", tc.Name, "reason", reason, "message", msg)
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.Event(tc, corev1.EventTypeWarning, reason, msg)
	}
}
