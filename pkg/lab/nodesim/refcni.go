package nodesim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// routeProtocol marks the routes this simulator installs (rtnetlink protocol
// numbers above RTPROT_STATIC are free for daemons; see rtnetlink(7)), so a
// restarted simulator finds and prunes its own stale routes and no others.
const routeProtocol netlink.RouteProtocol = 0x4c

// referenceBridge is the Linux bridge the reference bridge plugin creates in
// the node netns; its address is the pods' gateway.
const referenceBridge = "lab-br0"

// referenceConfList is the bridge + host-local network on the node's podCIDR.
func referenceConfList(podCIDR, ipamDir string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "lab-bridge",
		"plugins": []any{map[string]any{
			"type":      "bridge",
			"bridge":    referenceBridge,
			"isGateway": true,
			// A default route via the bridge: other nodes' pods are reached
			// through the node's routes to their podCIDRs.
			"isDefaultGateway": true,
			"ipMasq":           false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": podCIDR}}},
				"dataDir": ipamDir,
			},
		}},
	}, "", "  ")
}

// writeReferenceCNIConf waits for the node's podCIDR and writes the reference
// conflist, replacing it only when its content changes.
func (sim *simulator) writeReferenceCNIConf(ctx context.Context) error {
	var podCIDR string
	klog.InfoS("Waiting for the node's podCIDR", "node", sim.cfg.NodeName)
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		node, err := sim.nodeLister.Get(sim.cfg.NodeName)
		if err != nil || node.Spec.PodCIDR == "" {
			return false, nil
		}
		podCIDR = node.Spec.PodCIDR
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: waiting for podCIDR: %w", sim.cfg.NodeName, err)
	}
	b, err := referenceConfList(podCIDR, filepath.Join(sim.cfg.StateDir, "ipam"))
	if err != nil {
		return err
	}
	path := filepath.Join(sim.cfg.CNIConfDir, ReferenceCNIConfFile)
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("node %s: write %s: %w", sim.cfg.NodeName, path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("node %s: write %s: %w", sim.cfg.NodeName, path, err)
	}
	klog.InfoS("Wrote reference CNI configuration", "node", sim.cfg.NodeName, "podCIDR", podCIDR, "path", path)
	// Readiness depends on the configuration; say so now, not at the next heartbeat.
	if err := sim.updateNodeStatus(ctx); err != nil {
		klog.ErrorS(err, "Node status update failed", "node", sim.cfg.NodeName)
	}
	return nil
}

// routeController keeps, in the node netns, a route to every other Node's
// podCIDR via that Node's InternalIP. Every Node event leads to one full
// reconcile: the set is small and the reconcile idempotent.
type routeController struct {
	sim   *simulator
	queue workqueue.TypedRateLimitingInterface[string]
}

const routesKey = "routes"

func newRouteController(sim *simulator) *routeController {
	return &routeController{
		sim: sim,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodesim-routes"}),
	}
}

func (rc *routeController) handler() cache.ResourceEventHandler {
	enqueue := func(any) { rc.queue.Add(routesKey) }
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (rc *routeController) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		rc.queue.ShutDown()
	}()
	rc.queue.Add(routesKey)
	for {
		key, quit := rc.queue.Get()
		if quit {
			return
		}
		if err := rc.sync(); err != nil {
			klog.ErrorS(err, "Route sync failed, retrying", "node", rc.sim.cfg.NodeName)
			rc.queue.AddRateLimited(key)
		} else {
			rc.queue.Forget(key)
		}
		rc.queue.Done(key)
	}
}

// desiredRoutes maps each other Node's podCIDR to its InternalIP.
func desiredRoutes(self string, nodes []*corev1.Node) map[string]net.IP {
	want := map[string]net.IP{}
	for _, n := range nodes {
		if n.Name == self || n.Spec.PodCIDR == "" {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				if ip := net.ParseIP(a.Address); ip != nil {
					want[n.Spec.PodCIDR] = ip
				}
				break
			}
		}
	}
	return want
}

func (rc *routeController) sync() error {
	nodes, err := rc.sim.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	want := desiredRoutes(rc.sim.cfg.NodeName, nodes)
	have, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, r := range have {
		if r.Dst == nil {
			continue
		}
		if gw, ok := want[r.Dst.String()]; ok && gw.Equal(r.Gw) {
			delete(want, r.Dst.String())
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			return fmt.Errorf("delete route %s: %w", r.Dst, err)
		}
		klog.InfoS("Deleted route to a podCIDR", "node", rc.sim.cfg.NodeName, "dst", r.Dst, "via", r.Gw)
	}
	for cidr, gw := range want {
		_, dst, err := net.ParseCIDR(cidr)
		if err != nil {
			return fmt.Errorf("podCIDR %q: %w", cidr, err)
		}
		if err := netlink.RouteReplace(&netlink.Route{Dst: dst, Gw: gw, Protocol: routeProtocol}); err != nil {
			return fmt.Errorf("route %s via %s: %w", dst, gw, err)
		}
		klog.InfoS("Installed route to a podCIDR", "node", rc.sim.cfg.NodeName, "dst", dst, "via", gw)
	}
	return nil
}
