// Package simnodes makes simulated Nodes for scale runs (docs/scale.md):
// Node objects with a pod CIDR and a Ready condition, and a small fake
// kubelet that marks the pods bound to them Running with an IP from their
// Node's CIDR. Nothing runs: no containers, no processes, no network; only
// Node and Pod status are written, so thousands of Nodes fit on one machine
// (pkg/lab/nodesim, which runs each pod as a real process, is for the
// few nodes that carry traffic).
package simnodes

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Label marks a simulated Node (value "true"); the same key is its
// NoSchedule taint, so the scheduler places no pod there: pods reach a
// simulated Node only bound to it by name (or by a DaemonSet).
const Label = "antrea.io/simulated-node"

// DefaultCIDR is where the simulated Nodes' /24 pod CIDRs are cut from
// (outside the lab's cluster CIDR, so kube-controller-manager's allocator
// never hands them out).
var DefaultCIDR = netip.MustParsePrefix("10.128.0.0/9")

// NodeName is the name of simulated Node i.
func NodeName(i int) string { return fmt.Sprintf("sim-node-%05d", i) }

// NodeCIDR is the /24 of simulated Node i inside base.
func NodeCIDR(base netip.Prefix, i int) (netip.Prefix, error) {
	if base.Bits() > 24 || !base.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("sim CIDR %s: want an IPv4 prefix of /24 or shorter", base)
	}
	if i < 0 || i >= 1<<(24-base.Bits()) {
		return netip.Prefix{}, fmt.Errorf("sim CIDR %s has no room for node %d", base, i)
	}
	a := base.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8
	v += uint32(i) << 8
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), 0}), 24), nil
}

// EnsureNodes creates (or keeps) simulated Nodes 0..n-1 with their pod
// CIDR cut from base, Ready.
func EnsureNodes(ctx context.Context, client kubernetes.Interface, base netip.Prefix, n int) error {
	return forEach(ctx, n, 16, func(i int) error {
		cidr, err := NodeCIDR(base, i)
		if err != nil {
			return err
		}
		name := NodeName(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{Label: "true", corev1.LabelHostname: name}},
			Spec: corev1.NodeSpec{PodCIDR: cidr.String(), PodCIDRs: []string{cidr.String()},
				Taints: []corev1.Taint{{Key: Label, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}
		_, err = client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		// kube-controller-manager may change a new Node (taints) before its
		// status is written: read it again on a conflict.
		err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			cur, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			now := metav1.Now()
			cur.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Simulated",
				LastHeartbeatTime: now, LastTransitionTime: now}}
			cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
			_, err = client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("status of node %s: %w", name, err)
		}
		return nil
	})
}

// DeleteNodes removes simulated Nodes 0..n-1.
func DeleteNodes(ctx context.Context, client kubernetes.Interface, n int) error {
	return forEach(ctx, n, 16, func(i int) error {
		err := client.CoreV1().Nodes().Delete(ctx, NodeName(i), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s: %w", NodeName(i), err)
		}
		return nil
	})
}

// forEach runs f(0..n-1) on workers goroutines and returns the first error.
func forEach(ctx context.Context, n, workers int, f func(int) error) error {
	idx := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i++ {
		select {
		case idx <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(idx)
	go func() { wg.Wait(); close(errs) }()
	for e := range errs {
		if err == nil {
			err = e
		}
	}
	return err
}

// Kubelet is the fake kubelet of every simulated Node: a pod bound to one
// of them is given the next free IP of the Node's CIDR and marked Running
// and Ready; the IP is freed when the pod goes.
type Kubelet struct {
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[string]
	pods   cache.Indexer
	nodes  cache.Indexer

	mu sync.Mutex
	// used: node -> IP -> pod key; ipOf: pod key -> IP.
	used map[string]map[netip.Addr]string
	ipOf map[string]netip.Addr
}

// NewKubelet makes the fake kubelet.
func NewKubelet(client kubernetes.Interface) *Kubelet {
	return &Kubelet{client: client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "simnodes"}),
		used: map[string]map[netip.Addr]string{}, ipOf: map[string]netip.Addr{}}
}

// Run watches pods and simulated Nodes and writes pod status with workers
// goroutines until ctx ends.
func (k *Kubelet) Run(ctx context.Context, workers int) error {
	f := informers.NewSharedInformerFactoryWithOptions(k.client, 0)
	podInf := f.Core().V1().Pods().Informer()
	nodeInf := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = Label + "=true"
	})).Core().V1().Nodes().Informer()
	k.pods, k.nodes = podInf.GetIndexer(), nodeInf.GetIndexer()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue}); err != nil {
		return fmt.Errorf("pod handler: %w", err)
	}
	go podInf.Run(ctx.Done())
	go nodeInf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		return ctx.Err()
	}
	klog.InfoS("Simulated kubelet running", "nodes", len(k.nodes.ListKeys()))
	for w := 0; w < workers; w++ {
		go func() {
			for k.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	k.queue.ShutDown()
	return nil
}

func (k *Kubelet) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		klog.ErrorS(err, "Simulated kubelet failed to sync a pod; retrying", "pod", key)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// sync gives a pod bound to a simulated Node its IP and Running status.
func (k *Kubelet) sync(ctx context.Context, key string) error {
	obj, exists, err := k.pods.GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		k.release(key)
		return nil
	}
	pod := obj.(*corev1.Pod)
	nobj, isSim, _ := k.nodes.GetByKey(pod.Spec.NodeName)
	if !isSim || pod.DeletionTimestamp != nil {
		if pod.DeletionTimestamp != nil && isSim {
			// Nothing to stop: the pod is gone at once.
			zero := int64(0)
			err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	}
	if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
		k.adopt(pod.Spec.NodeName, key, pod.Status.PodIP)
		return nil
	}
	if pod.Spec.HostNetwork && pod.Status.Phase == corev1.PodRunning {
		return nil
	}
	var podIPs []corev1.PodIP
	if !pod.Spec.HostNetwork {
		// A hostNetwork pod (a DaemonSet's, e.g. antrea-agent, which
		// tolerates the taint) would have the Node's address, and a
		// simulated Node has none: it runs with no IP.
		cidr, err := netip.ParsePrefix(nobj.(*corev1.Node).Spec.PodCIDR)
		if err != nil {
			return fmt.Errorf("node %s pod CIDR: %w", pod.Spec.NodeName, err)
		}
		ip, err := k.allocate(pod.Spec.NodeName, cidr, key)
		if err != nil {
			return err
		}
		podIPs = []corev1.PodIP{{IP: ip.String()}}
	}
	now := metav1.Now()
	p := pod.DeepCopy()
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: podIPs,
		StartTime: &now, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if len(podIPs) > 0 {
		p.Status.PodIP = podIPs[0].IP
	}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	if _, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			k.release(key)
			return nil
		}
		k.release(key)
		return fmt.Errorf("status of pod %s: %w", key, err)
	}
	return nil
}

// allocate returns the pod's IP, taking the next free one of cidr (the
// network, the gateway .1 and the broadcast address are skipped).
func (k *Kubelet) allocate(node string, cidr netip.Prefix, key string) (netip.Addr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.ipOf[key]; ok {
		return ip, nil
	}
	used := k.used[node]
	if used == nil {
		used = map[netip.Addr]string{}
		k.used[node] = used
	}
	for ip := cidr.Masked().Addr().Next().Next(); cidr.Contains(ip.Next()); ip = ip.Next() {
		if _, taken := used[ip]; !taken {
			used[ip], k.ipOf[key] = key, ip
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("node %s: pod CIDR %s is full", node, cidr)
}

// adopt records an IP the pod already has (a restarted kubelet).
func (k *Kubelet) adopt(node, key, ip string) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.used[node] == nil {
		k.used[node] = map[netip.Addr]string{}
	}
	k.used[node][a], k.ipOf[key] = key, a
}

func (k *Kubelet) release(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ip, ok := k.ipOf[key]
	if !ok {
		return
	}
	delete(k.ipOf, key)
	for _, used := range k.used {
		if used[ip] == key {
			delete(used, ip)
		}
	}
}

// Heartbeat renews each simulated Node's Lease (kube-node-lease) every
// interval, spread over the interval, until ctx ends, so that
// kube-controller-manager's node lifecycle controller keeps them Ready (and
// their pods are not evicted). A cluster without that controller (the
// bench's bare kube-apiserver) needs none.
func Heartbeat(ctx context.Context, client kubernetes.Interface, n int, interval time.Duration) {
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	secs := int32(interval.Seconds() * 4)
	renew := func(i int) {
		name := NodeName(i)
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, LeaseDurationSeconds: &secs, RenewTime: &now}}
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec.RenewTime, l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &now, &name, &secs
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Could not renew a simulated Node's lease", "node", name)
		}
	}
	if n == 0 {
		return
	}
	step := interval / time.Duration(n)
	t := time.NewTicker(max(step, time.Millisecond))
	defer t.Stop()
	for i := 0; ; i = (i + 1) % n {
		renew(i)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WaitRunning waits until every pod of namespaces with the label selector
// sel is Running with an IP, polling every interval.
func WaitRunning(ctx context.Context, client kubernetes.Interface, sel string, want int, interval time.Duration) error {
	for {
		l, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: "0"})
		running := 0
		if err == nil {
			for i := range l.Items {
				if l.Items[i].Status.Phase == corev1.PodRunning && l.Items[i].Status.PodIP != "" {
					running++
				}
			}
			if running >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d pods running: %w", running, want, ctx.Err())
		case <-time.After(interval):
		}
	}
}
