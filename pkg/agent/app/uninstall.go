package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/egress"
	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/route"
)

// What the agent pod's install-cni put on the node (build/images/scripts/
// install_cni), as the agent container sees it.
const (
	hostCNIConfList        = "/host/etc/cni/net.d/10-antrea.conflist"
	hostChainedCNIConfList = "/host/etc/cni/net.d/05-antrea.conflist" // networkPolicyOnly
	hostCNIPlugin          = "/host/opt/cni/bin/antrea"
)

// setupUninstallWatcher cleans the node up (cleanUpIfUninstalled) when the
// agent stops because Antrea is being uninstalled. Set up right after the
// node, it stops after every part that could write again what it removes.
func setupUninstallWatcher(_ context.Context, d *deps) (component, error) {
	kube, gateway := d.kube, d.nc.Gateway.Name
	return onStop(func() { cleanUpIfUninstalled(kube, gateway) }), nil
}

// uninstalled says whether the agent stops because Antrea is being removed:
// the DaemonSet that owns this agent's pod (POD_NAMESPACE/POD_NAME) is gone
// or being deleted, or the agent may no longer read its own pod at all — its
// ServiceAccount or ClusterRole is gone, which `kubectl delete -f antrea.yml`
// does before the DaemonSet's pods stop, and which no upgrade does. An agent
// outside a pod, or one that cannot tell (the API server unreachable), says
// no.
func uninstalled(ctx context.Context, c kubernetes.Interface) bool {
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || name == "" {
		return false
	}
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		klog.InfoS("The agent may no longer read its own pod: its ServiceAccount or role was removed with Antrea", "err", err)
		return true
	}
	if err != nil {
		klog.ErrorS(err, "Cannot read the agent's own pod; assuming Antrea stays installed", "pod", ns+"/"+name)
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind != "DaemonSet" {
			continue
		}
		ds, err := c.AppsV1().DaemonSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
			return true
		case err != nil:
			klog.ErrorS(err, "Cannot read the agent's DaemonSet; assuming Antrea stays installed", "daemonSet", ns+"/"+ref.Name)
			return false
		default:
			return ds.DeletionTimestamp != nil || ds.UID != ref.UID
		}
	}
	return false
}

// cleanUpIfUninstalled runs when the agent stops: if Antrea is being
// uninstalled it removes the CNI conflist and plugin install-cni put on the
// node, so that kubelet reports the node's network not ready rather than
// sending pods to a CNI whose agent is gone, and another CNI can take over.
// It also removes the node path's nftables table, routes and neighbours
// (AntreaProxy's proxyAll), which only this agent maintains. The OVS
// database keeps the bridges, as upstream Antrea leaves them.
func cleanUpIfUninstalled(c kubernetes.Interface, gateway string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !uninstalled(ctx, c) {
		return
	}
	if err := route.RemoveNodePath(ctx, gateway); err != nil {
		klog.ErrorS(err, "Cannot remove AntreaProxy's node path", "chains", "nodeport-*")
	} else {
		klog.InfoS("Antrea is being uninstalled: removed AntreaProxy's node path", "chains", "nodeport-*")
	}
	if t, err := nodenet.New(); err != nil {
		klog.ErrorS(err, "Cannot remove the node's netfilter table")
	} else if err := t.Remove(ctx); err != nil {
		klog.ErrorS(err, "Cannot remove the node's netfilter table")
	} else {
		klog.InfoS("Antrea is being uninstalled: removed the node's netfilter table", "table", string(nodenet.TableFamily)+" "+nodenet.TableName)
	}
	if err := (egress.SubnetRouter{}).Sync(nil); err != nil {
		klog.ErrorS(err, "Cannot remove the ip rules and tables of Egress subnets")
	}
	for _, f := range []string{hostCNIConfList, hostChainedCNIConfList, hostCNIPlugin} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "Cannot remove a CNI file of Antrea", "file", f)
			continue
		}
		klog.InfoS("Antrea is being uninstalled: removed its CNI file from the node", "file", f, "dir", filepath.Dir(f))
	}
}
