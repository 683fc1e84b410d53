package nodesim

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// simulator is one running node simulator.
type simulator struct {
	cfg      Config
	client   kubernetes.Interface
	cni      *libcni.CNIConfig
	recorder record.EventRecorder

	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	queue      workqueue.TypedRateLimitingInterface[string]

	// mu guards states, keyed by namespace/name. The workqueue never hands
	// one key to two workers, so a pod's state is only changed by one sync.
	mu     sync.Mutex
	states map[string]*podState
	// exits holds the exit of each child process until a sync consumes it.
	exits map[int]exitRecord

	lastNetworkReady atomic.Bool
}

// Run simulates the node until ctx is cancelled. Pods are left as they are
// when it returns, so a restarted simulator adopts them; Cleanup removes them.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	for _, d := range []string{cfg.StateDir, cfg.PodLogDir, cfg.CNICacheDir, cfg.CNIConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("node %s: kubeconfig %s: %w", cfg.NodeName, cfg.Kubeconfig, err)
	}
	restCfg.UserAgent = "antrea-lab-nodesim/" + cfg.NodeName
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("node %s: client: %w", cfg.NodeName, err)
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	sim := &simulator{
		cfg:      cfg,
		client:   client,
		cni:      libcni.NewCNIConfigWithCacheDir(cfg.CNIBinDirs, cfg.CNICacheDir, nil),
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nodesim", Host: cfg.NodeName}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodesim-pods"}),
		states: map[string]*podState{},
		exits:  map[int]exitRecord{},
	}
	defer sim.queue.ShutDown()
	return sim.run(ctx)
}

func (sim *simulator) run(ctx context.Context) error {
	cfg := sim.cfg
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := sim.registerNode(ctx); err != nil {
			klog.ErrorS(err, "Node registration failed, retrying", "node", cfg.NodeName)
			return false, nil
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("node %s: registration: %w", cfg.NodeName, err)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { sim.heartbeat(ctx) })

	nodeFactory := informers.NewSharedInformerFactory(sim.client, 0)
	nodeInformer := nodeFactory.Core().V1().Nodes()
	sim.nodeLister = nodeInformer.Lister()
	var routes *routeController
	if cfg.ReferenceCNI {
		routes = newRouteController(sim)
		if _, err := nodeInformer.Informer().AddEventHandler(routes.handler()); err != nil {
			return fmt.Errorf("node %s: node informer: %w", cfg.NodeName, err)
		}
	}
	nodeFactory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop only once ctx is done.
	defer func() { cancel(); nodeFactory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.Informer().HasSynced) {
		return fmt.Errorf("node %s: node informer did not sync: %w", cfg.NodeName, ctx.Err())
	}
	if routes != nil {
		// Pods must not be wired before the network exists: the reference
		// CNI configuration needs the podCIDR that the controller-manager gives.
		if err := sim.writeReferenceCNIConf(ctx); err != nil {
			return err
		}
		wg.Go(func() { routes.run(ctx) })
	}

	states, err := loadStates(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("node %s: %w", cfg.NodeName, err)
	}
	for _, s := range states {
		sim.states[s.key()] = s
	}

	podFactory := informers.NewSharedInformerFactoryWithOptions(sim.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
		}))
	podInformer := podFactory.Core().V1().Pods()
	sim.podLister = podInformer.Lister()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sim.enqueue,
		UpdateFunc: func(_, obj any) { sim.enqueue(obj) },
		DeleteFunc: sim.enqueue,
	}); err != nil {
		return fmt.Errorf("node %s: pod informer: %w", cfg.NodeName, err)
	}
	podFactory.Start(ctx.Done())
	defer func() { cancel(); podFactory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return fmt.Errorf("node %s: pod informer did not sync: %w", cfg.NodeName, ctx.Err())
	}
	// Before any ADD can run: DEL whatever the CNI cache holds that no
	// recorded sandbox owns (e.g. state lost in a crash), freeing its IP.
	sim.garbageCollect(ctx, states)
	// Pods that went away while we were down are only known from their state.
	for _, s := range states {
		sim.queue.Add(s.key())
	}
	klog.InfoS("Node simulator running", "node", cfg.NodeName, "adoptable", len(states), "workers", cfg.Workers)

	for range cfg.Workers {
		wg.Go(func() {
			for sim.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { wait.UntilWithContext(ctx, sim.checkProcesses, 2*time.Second) })
	<-ctx.Done()
	sim.queue.ShutDown()
	klog.InfoS("Node simulator stopping; pods keep running", "node", cfg.NodeName)
	return nil
}

func (sim *simulator) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	sim.queue.Add(key)
}

func (sim *simulator) processNext(ctx context.Context) bool {
	key, quit := sim.queue.Get()
	if quit {
		return false
	}
	defer sim.queue.Done(key)
	if err := sim.sync(ctx, key); err != nil {
		klog.ErrorS(err, "Pod sync failed, retrying", "pod", key, "retries", sim.queue.NumRequeues(key))
		sim.queue.AddRateLimited(key)
		return true
	}
	sim.queue.Forget(key)
	return true
}

// checkProcesses requeues pods with a dead process. Processes started by this
// simulator report their exit themselves; adopted ones, which are not our
// children, are only found dead this way.
func (sim *simulator) checkProcesses(context.Context) {
	sim.mu.Lock()
	var dead []string
	for key, s := range sim.states {
		for _, c := range s.Containers {
			if c.PID > 0 && !alive(c.PID, c.StartTicks) {
				dead = append(dead, key)
				break
			}
		}
	}
	sim.mu.Unlock()
	for _, key := range dead {
		sim.queue.Add(key)
	}
}

// garbageCollect runs CNI GC (libcni: DEL of every cached attachment not in
// the valid list, then GC for CNI 1.1 plugins) with the recorded sandboxes as
// the valid attachments, as containerd does. Failures are only logged: GC is
// hygiene, not a condition for running pods.
func (sim *simulator) garbageCollect(ctx context.Context, states []*podState) {
	list, err := loadCNIConfList(sim.cfg.CNIConfDir)
	if err != nil {
		return
	}
	var valid []cnitypes.GCAttachment
	for _, s := range states {
		if s.SandboxID != "" && s.NetNS != "" {
			valid = append(valid, cnitypes.GCAttachment{ContainerID: s.SandboxID, IfName: podIfName})
		}
	}
	if err := sim.cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		klog.ErrorS(err, "CNI GC failed", "node", sim.cfg.NodeName, "network", list.Name)
		return
	}
	klog.InfoS("CNI GC done", "node", sim.cfg.NodeName, "network", list.Name, "validAttachments", len(valid))
}
