package networkpolicy

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

// watchListResources are the resources the watchers watch: their kind,
// and a bookmark of their type, as the server sends.
var watchListResources = map[string]struct {
	kind     string
	bookmark func(metav1.ObjectMeta) runtime.Object
}{
	"networkpolicies": {"NetworkPolicy", func(m metav1.ObjectMeta) runtime.Object { return &cpv1beta2.NetworkPolicy{ObjectMeta: m} }},
	"addressgroups":   {"AddressGroup", func(m metav1.ObjectMeta) runtime.Object { return &cpv1beta2.AddressGroup{ObjectMeta: m} }},
	"appliedtogroups": {"AppliedToGroup", func(m metav1.ObjectMeta) runtime.Object { return &cpv1beta2.AppliedToGroup{ObjectMeta: m} }},
}

// newClient is a fake controlplane clientset that answers a watch-list
// (sendInitialEvents) as antrea-controller does (pkg/apiserver/storage): the
// objects the tracker holds as ADDED events, a bookmark annotated
// k8s.io/initial-events-end, then the tracker's changes. client-go's fake
// sends no initial events. The real server's side is tested in
// pkg/apiserver/storage, and this package's watchers against the real
// server by TestAgentsWatchTheControllerDirectly (pkg/controller/app).
func newClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewSimpleClientset(objs...)
	c.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		wa, ok := a.(k8stesting.WatchActionImpl)
		if !ok || wa.ListOptions.SendInitialEvents == nil || !*wa.ListOptions.SendInitialEvents {
			return false, nil, nil
		}
		gvr, ns := a.GetResource(), a.GetNamespace()
		// Watch first, then list: a change in between is sent twice (an
		// ADDED of a listed object), never lost.
		changes, err := c.Tracker().Watch(gvr, ns)
		if err != nil {
			return true, nil, err
		}
		r, ok := watchListResources[gvr.Resource]
		if !ok {
			changes.Stop()
			return false, nil, nil
		}
		list, err := c.Tracker().List(gvr, gvr.GroupVersion().WithKind(r.kind), ns)
		if err != nil {
			changes.Stop()
			return true, nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			changes.Stop()
			return true, nil, err
		}
		out := make(chan watch.Event)
		pw := watch.NewProxyWatcher(out)
		go func() {
			defer changes.Stop()
			send := func(ev watch.Event) bool {
				select {
				case out <- ev:
					return true
				case <-pw.StopChan():
					return false
				}
			}
			for _, o := range items {
				if !send(watch.Event{Type: watch.Added, Object: o}) {
					return
				}
			}
			end := metav1.ObjectMeta{Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}
			if !send(watch.Event{Type: watch.Bookmark, Object: r.bookmark(end)}) {
				return
			}
			for {
				select {
				case ev, ok := <-changes.ResultChan():
					if !ok || !send(ev) {
						return
					}
				case <-pw.StopChan():
					return
				}
			}
		}()
		return true, pw, nil
	})
	return c
}
