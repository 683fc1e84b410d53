// Package supportbundlecollection is antrea-controller's side of
// SupportBundleCollection (crd.antrea.io/v1alpha1, docs/support-bundle-guide.md).
// The controller alone decides which Nodes a collection asks and when it
// ends; the agents collect and upload:
//
//   - start: it selects the Nodes (spec.nodes: by name or label, every Node
//     when both are empty) and writes them into status.nodes as Pending, with
//     desiredNodes and the condition Started. An agent acts only on a
//     collection that lists its Node as Pending (pkg/agent/supportbundlecollection),
//     so the Nodes that work are exactly the Nodes counted;
//   - the agents write their own Node's result (Collected, or Failed with why)
//     into status.nodes;
//   - it keeps collectedNodes and the conditions BundleCollected,
//     CollectionFailure (its message names each failed Node and why) and
//     Completed equal to status.nodes, and at expiration (the Started time
//     plus spec.expirationMinutes) marks the Nodes still Pending Failed.
//
// A named Node that does not exist fails at once; spec.externalNodes is
// accepted but this Antrea has no ExternalNodes, which the failure says.
// A finished collection is never started again.
package supportbundlecollection

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
	"antrea.io/antrea/pkg/util/namequeue"
)

// Reasons of the conditions.
const (
	ReasonNodesSelected   = "NodesSelected"
	ReasonNoNodeSelected  = "NoNodeSelected"
	ReasonNodesFailed     = "NodesFailed"
	ReasonBundleUploaded  = "BundleUploaded"
	ReasonAllNodesDone    = "AllNodesReported"
	ReasonWaitingForNodes = "WaitingForNodes"
)

// Controller drives the status of every SupportBundleCollection.
type Controller struct {
	client   versioned.Interface
	lister   crdlisters.SupportBundleCollectionLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	queue    *namequeue.Queue
	recorder record.EventRecorder
	now      func() time.Time
}

// NewController watches SupportBundleCollections and reads Nodes.
func NewController(client versioned.Interface, informer crdinformers.SupportBundleCollectionInformer,
	nodes cache.SharedIndexInformer, recorder record.EventRecorder) (*Controller, error) {
	c := &Controller{
		client:   client,
		lister:   informer.Lister(),
		nodes:    corelisters.NewNodeLister(nodes.GetIndexer()),
		synced:   []cache.InformerSynced{informer.Informer().HasSynced, nodes.HasSynced},
		recorder: recorder,
		now:      time.Now,
	}
	c.queue = namequeue.NewRequeueing("SupportBundleCollection", informer.Informer(), c.sync)
	return c, nil
}

// Run syncs SupportBundleCollections until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	klog.InfoS("Started the SupportBundleCollection controller")
	c.queue.Run(ctx)
}

// sync brings one collection's status up to date; it returns when to look
// at it again (its expiration, while Nodes are pending).
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	if _, err := c.lister.Get(name); apierrors.IsNotFound(err) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	var requeue time.Duration
	var finished *crdv1alpha1.SupportBundleCollection
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// The latest object: the agents write into the same status.
		sbc, err := c.client.CrdV1alpha1().SupportBundleCollections().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		status, left := Advance(sbc, nodes, c.now())
		requeue = left
		if equality.Semantic.DeepEqual(status, sbc.Status) {
			return nil
		}
		wasComplete := IsCompleted(&sbc.Status)
		sbc = sbc.DeepCopy()
		sbc.Status = status
		if _, err := c.client.CrdV1alpha1().SupportBundleCollections().UpdateStatus(ctx, sbc, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if !wasComplete && IsCompleted(&status) {
			finished = sbc
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if finished != nil {
		c.report(finished)
	}
	return requeue, nil
}

// report logs and records an Event when a collection completes.
func (c *Controller) report(sbc *crdv1alpha1.SupportBundleCollection) {
	failure := condition(&sbc.Status, crdv1alpha1.CollectionFailure)
	if failure != nil && failure.Status == metav1.ConditionTrue {
		klog.InfoS("SupportBundleCollection completed with failures", "supportBundleCollection", sbc.Name,
			"collected", sbc.Status.CollectedNodes, "desired", sbc.Status.DesiredNodes, "failures", failure.Message)
		c.recorder.Eventf(sbc, corev1.EventTypeWarning, string(crdv1alpha1.CollectionFailure),
			"%d of %d Nodes uploaded their bundle; %s", sbc.Status.CollectedNodes, sbc.Status.DesiredNodes, failure.Message)
		return
	}
	klog.InfoS("SupportBundleCollection completed", "supportBundleCollection", sbc.Name, "collected", sbc.Status.CollectedNodes)
	c.recorder.Eventf(sbc, corev1.EventTypeNormal, string(crdv1alpha1.CollectionCompleted),
		"%d of %d Nodes uploaded their bundle", sbc.Status.CollectedNodes, sbc.Status.DesiredNodes)
}

// IsCompleted says whether a collection's Completed condition is True.
func IsCompleted(st *crdv1alpha1.SupportBundleCollectionStatus) bool {
	cond := condition(st, crdv1alpha1.CollectionCompleted)
	return cond != nil && cond.Status == metav1.ConditionTrue
}

// Advance is the status a collection has at now, given the cluster's Nodes,
// and how long until it must be looked at again (0: not before it changes).
// It is pure: sync writes what it returns.
func Advance(sbc *crdv1alpha1.SupportBundleCollection, nodes []*corev1.Node, now time.Time) (crdv1alpha1.SupportBundleCollectionStatus, time.Duration) {
	st := *sbc.Status.DeepCopy()
	if IsCompleted(&st) {
		return st, 0
	}
	if cond := condition(&st, crdv1alpha1.CollectionStarted); cond == nil || cond.Status != metav1.ConditionTrue {
		st.Nodes = SelectNodes(&sbc.Spec, nodes)
		st.DesiredNodes = int32(len(st.Nodes))
		reason, msg := ReasonNodesSelected, fmt.Sprintf("%d Nodes selected", len(st.Nodes))
		if len(st.Nodes) == 0 {
			reason, msg = ReasonNoNodeSelected, "no Node is selected"
		}
		setCondition(&st, crdv1alpha1.CollectionStarted, metav1.ConditionTrue, reason, msg, now)
	}
	expiration := crdv1alpha1.CollectionExpiration(&crdv1alpha1.SupportBundleCollection{ObjectMeta: sbc.ObjectMeta, Spec: sbc.Spec, Status: st})
	expired := !now.Before(expiration)
	var collected int32
	var failed []string
	pending := 0
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.State == crdv1alpha1.NodePending && expired {
			n.State = crdv1alpha1.NodeFailed
			n.Message = fmt.Sprintf("did not upload its bundle within expirationMinutes (%d)", crdv1alpha1.ExpirationMinutes(sbc))
		}
		switch n.State {
		case crdv1alpha1.NodeCollected:
			collected++
		case crdv1alpha1.NodeFailed:
			failed = append(failed, fmt.Sprintf("Node %s: %s", n.Name, n.Message))
		default:
			pending++
		}
	}
	if sbc.Spec.ExternalNodes != nil {
		failed = append(failed, fmt.Sprintf("externalNodes (Namespace %s): this Antrea has no ExternalNodes", sbc.Spec.ExternalNodes.Namespace))
	}
	st.CollectedNodes = collected
	if collected > 0 {
		setCondition(&st, crdv1alpha1.BundleCollected, metav1.ConditionTrue, ReasonBundleUploaded,
			fmt.Sprintf("%d Nodes uploaded their bundle", collected), now)
	} else {
		setCondition(&st, crdv1alpha1.BundleCollected, metav1.ConditionFalse, "", "", now)
	}
	if len(st.Nodes) == 0 && sbc.Spec.ExternalNodes == nil {
		failed = append(failed, "no Node matches spec.nodes")
	}
	if len(failed) > 0 {
		setCondition(&st, crdv1alpha1.CollectionFailure, metav1.ConditionTrue, ReasonNodesFailed, strings.Join(failed, "; "), now)
	} else {
		setCondition(&st, crdv1alpha1.CollectionFailure, metav1.ConditionFalse, "", "", now)
	}
	if pending == 0 {
		setCondition(&st, crdv1alpha1.CollectionCompleted, metav1.ConditionTrue, ReasonAllNodesDone,
			fmt.Sprintf("%d of %d Nodes uploaded their bundle", collected, len(st.Nodes)), now)
		return st, 0
	}
	setCondition(&st, crdv1alpha1.CollectionCompleted, metav1.ConditionFalse, ReasonWaitingForNodes,
		fmt.Sprintf("%d Nodes have not reported", pending), now)
	return st, expiration.Sub(now)
}

// SelectNodes is the Nodes of spec.nodes, sorted, each Pending: those named
// and those matching nodeSelector or matchLabels; every Node when none is
// given. A
// named Node that does not exist is Failed.
func SelectNodes(spec *crdv1alpha1.SupportBundleCollectionSpec, nodes []*corev1.Node) []crdv1alpha1.SupportBundleCollectionNodeResult {
	if spec.Nodes == nil {
		return nil
	}
	names := map[string]bool{}
	for _, n := range spec.Nodes.NodeNames {
		names[n] = true
	}
	all := len(names) == 0 && spec.Nodes.NodeSelector == nil && len(spec.Nodes.MatchLabels) == 0
	var selectors []labels.Selector
	if spec.Nodes.NodeSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(spec.Nodes.NodeSelector)
		if err != nil {
			// Admission refuses it; select nothing by it.
			s = labels.Nothing()
		}
		selectors = append(selectors, s)
	}
	if len(spec.Nodes.MatchLabels) > 0 {
		selectors = append(selectors, labels.SelectorFromSet(spec.Nodes.MatchLabels))
	}
	matches := func(n *corev1.Node) bool {
		for _, s := range selectors {
			if s.Matches(labels.Set(n.Labels)) {
				return true
			}
		}
		return false
	}
	var out []crdv1alpha1.SupportBundleCollectionNodeResult
	existing := map[string]bool{}
	for _, n := range nodes {
		existing[n.Name] = true
		if all || names[n.Name] || matches(n) {
			out = append(out, crdv1alpha1.SupportBundleCollectionNodeResult{Name: n.Name, State: crdv1alpha1.NodePending})
		}
	}
	for name := range names {
		if !existing[name] {
			out = append(out, crdv1alpha1.SupportBundleCollectionNodeResult{Name: name, State: crdv1alpha1.NodeFailed,
				Message: "no such Node"})
		}
	}
	slices.SortFunc(out, func(a, b crdv1alpha1.SupportBundleCollectionNodeResult) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func condition(st *crdv1alpha1.SupportBundleCollectionStatus, t crdv1alpha1.SupportBundleCollectionConditionType) *crdv1alpha1.SupportBundleCollectionCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition; its transition time moves only when its
// status changes.
func setCondition(st *crdv1alpha1.SupportBundleCollectionStatus, t crdv1alpha1.SupportBundleCollectionConditionType,
	status metav1.ConditionStatus, reason, message string, now time.Time) {
	if cond := condition(st, t); cond != nil {
		if cond.Status != status {
			cond.LastTransitionTime = metav1.NewTime(now)
		}
		cond.Status, cond.Reason, cond.Message = status, reason, message
		return
	}
	st.Conditions = append(st.Conditions, crdv1alpha1.SupportBundleCollectionCondition{Type: t, Status: status,
		LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: message})
}
