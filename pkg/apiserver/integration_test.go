package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	informers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/app"
	"antrea.io/antrea/pkg/controller/types"
)

type harness struct {
	ctx    context.Context
	cp     *apiservertest.ControlPlane
	stores *apiserver.Stores
	port   int
	// stop cancels the server's context and waits for Run to return, at most
	// 30 s (the kubelet's default termination grace period).
	stop func() error
}

// startControlPlane starts kube-apiserver (aggregation enabled) and our API
// server on loopback, applies the manifests and waits for the APIService.
func startControlPlane(t testing.TB) *harness {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{ctx: ctx, cp: cp}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.port = ln.Addr().(*net.TCPAddr).Port
	opts := apiserver.NewOptions()
	opts.SecureServing.Listener = ln
	opts.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.SecureServing.BindPort = h.port
	opts.SecureServing.ServerCert.CertDirectory = filepath.Join(cp.Dir, "serving")
	h.stores = apiserver.NewStores()
	server, err := apiserver.New(opts, cp.Kubeconfig, h.stores, nil)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("apiserver.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx) }()
	var stopped error
	var stopOnce sync.Once
	h.stop = func() error {
		stopOnce.Do(func() {
			cancel()
			select {
			case err := <-done:
				stopped = err
			case <-time.After(30 * time.Second):
				stopped = errors.New("server.Run did not return within 30 s of its context's end")
			}
		})
		return stopped
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})

	cp.ApplyAntrea(t, ctx, h.port)
	// The CA goes in the way antrea-controller puts it (--sync-apiservice-ca).
	ca, err := server.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{app.APIServiceName, app.StatsAPIServiceName} {
		if err := app.SetAPIServiceCABundle(ctx, aggregatorclient.NewForConfigOrDie(cp.Config), name, ca); err != nil {
			t.Fatal(err)
		}
	}
	cp.WaitAPIServiceAvailable(t, ctx)
	return h
}

func member(name, ip string) *controlplane.GroupMember {
	return &controlplane.GroupMember{Pod: &controlplane.PodReference{Namespace: "ns", Name: name},
		IPs: []controlplane.IPAddress{controlplane.IPAddress(net.ParseIP(ip).To4())}}
}

func atg(byNode map[string][]*controlplane.GroupMember) *types.AppliedToGroup {
	g := &types.AppliedToGroup{Name: "atg", UID: "atg", SpanMeta: types.SpanMeta{NodeNames: sets.New[string]()},
		Members: types.NewNodeMembers(byNode)}
	for n := range byNode {
		g.NodeNames.Insert(n)
	}
	return g
}

// TestRunReturnsWhileAgentsWatch: antrea-controller stops on SIGTERM while
// every agent holds its policy watches open, well inside the kubelet's
// termination grace period (30 s): before, the HTTP server waited up to its
// shutdown timeout (the 60-s request timeout) for the watches to end, and
// the kubelet killed the controller at 30 s.
func TestRunReturnsWhileAgentsWatch(t *testing.T) {
	h := startControlPlane(t)
	agent := versioned.NewForConfigOrDie(h.cp.Config).ControlplaneV1beta2()
	for _, w := range []func(context.Context, metav1.ListOptions) (watch.Interface, error){
		agent.NetworkPolicies().Watch, agent.AddressGroups().Watch, agent.AppliedToGroups().Watch,
	} {
		wi, err := w(context.Background(), metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil {
			t.Fatal(err)
		}
		defer wi.Stop()
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestControlplaneAPIThroughKubeAPIServer(t *testing.T) {
	h := startControlPlane(t)
	ctx := h.ctx

	agentUser, err := h.cp.Env.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:antrea-agent", Groups: []string{"system:serviceaccounts"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := versioned.NewForConfigOrDie(agentUser.Config())
	strangerUser, err := h.cp.Env.AddUser(envtest.User{Name: "stranger"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger := versioned.NewForConfigOrDie(strangerUser.Config())

	t.Run("anonymous requests are refused by our server and through kube-apiserver", func(t *testing.T) {
		insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		for _, url := range []string{
			fmt.Sprintf("https://127.0.0.1:%d/apis/controlplane.antrea.io/v1beta2/networkpolicies", h.port),
			strings.TrimSuffix(h.cp.Config.Host, "/") + "/apis/controlplane.antrea.io/v1beta2/networkpolicies",
		} {
			resp, err := insecure.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s anonymously: %d, want 401 or 403", url, resp.StatusCode)
			}
			t.Logf("GET %s anonymously: %d", url, resp.StatusCode)
		}
	})

	t.Run("a user without the agent role is forbidden", func(t *testing.T) {
		_, err := stranger.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("List as stranger: %v, want Forbidden", err)
		}
	})

	if err := h.stores.AppliedToGroups.Create(atg(map[string][]*controlplane.GroupMember{
		"n1": {member("a", "10.10.1.1")}, "n2": {member("b", "10.10.2.1")}})); err != nil {
		t.Fatal(err)
	}
	np := &types.NetworkPolicy{Name: "np", UID: "np", Generation: 1, SpanMeta: types.SpanMeta{NodeNames: sets.New("n1", "n2")},
		AppliedToGroups: []string{"atg"},
		SourceRef:       &controlplane.NetworkPolicyReference{Type: controlplane.K8sNetworkPolicy, Namespace: "ns", Name: "deny"},
		Rules:           []controlplane.NetworkPolicyRule{{Direction: controlplane.DirectionIn}}}
	if err := h.stores.NetworkPolicies.Create(np); err != nil {
		t.Fatal(err)
	}

	t.Run("the agent lists only its node's slice with nodeName", func(t *testing.T) {
		for _, tc := range []struct {
			selector string
			want     int
		}{{"nodeName=n1", 1}, {"nodeName=n3", 0}, {"", 1}} {
			l, err := agent.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatalf("List(%q): %v", tc.selector, err)
			}
			if len(l.Items) != tc.want {
				t.Errorf("List(%q) = %d policies, want %d", tc.selector, len(l.Items), tc.want)
			}
		}
		l, err := agent.ControlplaneV1beta2().AppliedToGroups().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil || len(l.Items) != 1 || len(l.Items[0].GroupMembers) != 1 || l.Items[0].GroupMembers[0].Pod.Name != "a" {
			t.Fatalf("AppliedToGroups for n1 = %+v, %v; want atg with member a only", l, err)
		}
	})

	t.Run("a watcher of n1 gets nothing for n2's pods and a patch for its own", func(t *testing.T) {
		w, err := agent.ControlplaneV1beta2().AppliedToGroups().Watch(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		// next skips bookmarks: clients may ask for them (client-go's watch-list
		// does), and they carry no change.
		next := func() watch.Event {
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatal("watch closed")
					}
					if ev.Type == watch.Bookmark {
						continue
					}
					return ev
				case <-time.After(10 * time.Second):
					t.Fatal("no watch event")
				}
			}
		}
		if ev := next(); ev.Type != watch.Added {
			t.Fatalf("first event %s, want ADDED", ev.Type)
		}
		// Pods on n2 change, then a pod on n1: the next event n1 sees must be
		// its own patch, proving the n2 change sent it nothing.
		if err := h.stores.AppliedToGroups.Update(atg(map[string][]*controlplane.GroupMember{
			"n1": {member("a", "10.10.1.1")}, "n2": {member("b", "10.10.2.1"), member("c", "10.10.2.2")}})); err != nil {
			t.Fatal(err)
		}
		if err := h.stores.AppliedToGroups.Update(atg(map[string][]*controlplane.GroupMember{
			"n1": {member("a", "10.10.1.1"), member("d", "10.10.1.2")}, "n2": {member("b", "10.10.2.1"), member("c", "10.10.2.2")}})); err != nil {
			t.Fatal(err)
		}
		ev := next()
		patch, ok := ev.Object.(*v1beta2.AppliedToGroupPatch)
		if ev.Type != watch.Modified || !ok {
			t.Fatalf("got %s %T %+v, want MODIFIED AppliedToGroupPatch", ev.Type, ev.Object, ev.Object)
		}
		if len(patch.AddedGroupMembers) != 1 || patch.AddedGroupMembers[0].Pod.Name != "d" || len(patch.RemovedGroupMembers) != 0 {
			t.Fatalf("patch = %+v, want only d added", patch)
		}
	})

	t.Run("an informer of the generated client syncs and follows changes", func(t *testing.T) {
		factory := informers.NewSharedInformerFactoryWithOptions(agent, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "nodeName=n1"
		}))
		informer := factory.Controlplane().V1beta2().NetworkPolicies()
		lister := informer.Lister()
		informer.Informer()
		stop := make(chan struct{})
		factory.Start(stop)
		defer func() {
			// Shutdown waits for the informers, which stop only once stop is closed.
			close(stop)
			factory.Shutdown()
		}()
		syncCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				t.Fatalf("informer of %v never synced", typ)
			}
		}
		if l, _ := lister.List(labels.Everything()); len(l) != 1 {
			t.Fatalf("informer holds %d policies, want 1", len(l))
		}
		if err := h.stores.NetworkPolicies.Create(&types.NetworkPolicy{Name: "np2", Generation: 1, SpanMeta: types.SpanMeta{NodeNames: sets.New("n1")}}); err != nil {
			t.Fatal(err)
		}
		defer h.stores.NetworkPolicies.Delete("np2")
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			_, err := lister.Get("np2")
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("the informer never saw np2: %v", err)
		}
	})

	t.Run("agents report realization and kubectl shows it", func(t *testing.T) {
		_, err := agent.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, "np", &v1beta2.NetworkPolicyStatus{
			ObjectMeta: metav1.ObjectMeta{Name: "np"},
			Nodes:      []v1beta2.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 1}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("UpdateStatus: %v", err)
		}
		_, err = agent.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, "missing", &v1beta2.NetworkPolicyStatus{
			Nodes: []v1beta2.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 1}}}, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("UpdateStatus of a missing policy: %v, want NotFound", err)
		}
		raw, err := agent.ControlplaneV1beta2().RESTClient().Get().Resource("networkpolicies").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		if len(table.Rows) != 1 || table.Rows[0].Cells[4] != "1/2" {
			t.Fatalf("table rows %+v, want np realized 1/2", table.Rows)
		}
		kubectl := filepath.Join(h.cp.Assets, "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			t.Skip("no kubectl next to kube-apiserver")
		}
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", h.cp.Kubeconfig, "get", "networkpolicies.controlplane.antrea.io").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "K8sNetworkPolicy:ns/deny") || !strings.Contains(string(out), "1/2") {
			t.Fatalf("kubectl get printed:\n%s\nwant the source and 1/2", out)
		}
		t.Logf("kubectl get networkpolicies.controlplane.antrea.io:\n%s", out)

		out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", h.cp.Kubeconfig, "get", "appliedtogroups.controlplane.antrea.io",
			"--field-selector", "nodeName=n1", "-o", "jsonpath={.items[*].groupMembers[*].pod.name}").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "a d" {
			t.Errorf("kubectl get appliedtogroups --field-selector nodeName=n1 printed %q (%v), want the members on n1: a d", out, err)
		}
		// kube-apiserver aggregates the OpenAPI of an APIService asynchronously.
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			raw, err := agent.ControlplaneV1beta2().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctx)
			return err == nil && strings.Contains(string(raw), "apis/controlplane.antrea.io/v1beta2"), nil
		})
		if err != nil {
			t.Fatalf("kube-apiserver never aggregated the controlplane OpenAPI: %v", err)
		}
		out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", h.cp.Kubeconfig, "explain", "networkpolicies.controlplane.antrea.io.sourceRef").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "NetworkPolicyReference") {
			t.Errorf("kubectl explain printed:\n%s\n(%v), want the NetworkPolicyReference schema", out, err)
		}
	})
}
