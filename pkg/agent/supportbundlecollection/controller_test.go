package supportbundlecollection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/util/fileserver"
	"antrea.io/antrea/pkg/util/fileserver/fileservertest"
)

const password = "s3cr3t-Pa55word"

// upload is one call of the fake Uploader.
type upload struct {
	server  fileserver.Server
	name    string
	content string
}

// fakeServer records uploads, or fails them with err.
type fakeServer struct {
	mu      sync.Mutex
	uploads []upload
	err     error
}

func (f *fakeServer) upload(_ context.Context, s fileserver.Server, name string, content io.Reader) error {
	data, err := io.ReadAll(content)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.uploads = append(f.uploads, upload{s, name, string(data)})
	return nil
}

func (f *fakeServer) got() []upload {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]upload(nil), f.uploads...)
}

// collection is a started collection listing nodes, each Pending.
func collection(name string, nodes ...string) *crdv1alpha1.SupportBundleCollection {
	sbc := &crdv1alpha1.SupportBundleCollection{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
		Spec: crdv1alpha1.SupportBundleCollectionSpec{Nodes: &crdv1alpha1.BundleNodes{}, ExpirationMinutes: 10, SinceTime: "2h",
			FileServer: crdv1alpha1.BundleFileServer{URL: "files.example:22/root/test"},
			Authentication: crdv1alpha1.BundleServerAuthConfiguration{AuthType: crdv1alpha1.BasicAuthentication,
				AuthSecret: &corev1.SecretReference{Name: "sftp", Namespace: "default"}}},
		Status: crdv1alpha1.SupportBundleCollectionStatus{DesiredNodes: int32(len(nodes)), Conditions: []crdv1alpha1.SupportBundleCollectionCondition{
			{Type: crdv1alpha1.CollectionStarted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now()}}},
	}
	for _, n := range nodes {
		sbc.Status.Nodes = append(sbc.Status.Nodes, crdv1alpha1.SupportBundleCollectionNodeResult{Name: n, State: crdv1alpha1.NodePending})
	}
	return sbc
}

type env struct {
	c      *Controller
	client *fake.Clientset
	server *fakeServer
	events *record.FakeRecorder
	// collected counts the bundles made; inFlight catches two at once.
	collected, inFlight, overlap atomic.Int32
	since                        []time.Time
}

func newEnv(t *testing.T, objs ...*crdv1alpha1.SupportBundleCollection) *env {
	t.Helper()
	e := newEnvWith(t, map[string][]byte{"username": []byte("bundles"), "password": []byte(password)}, objs...)
	e.c.cfg.Upload = e.server.upload
	return e
}

// newEnvWith uploads with fileserver.Upload, with the Secret's data.
func newEnvWith(t *testing.T, secret map[string][]byte, objs ...*crdv1alpha1.SupportBundleCollection) *env {
	t.Helper()
	kube := k8sfake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sftp"}, Data: secret})
	client := fake.NewSimpleClientset()
	for _, o := range objs {
		if _, err := client.CrdV1alpha1().SupportBundleCollections().Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{client: client, server: &fakeServer{}, events: record.NewFakeRecorder(20)}
	var sinceMu sync.Mutex
	f := crdinformers.NewSharedInformerFactory(client, 0)
	c, err := NewController(Config{NodeName: "worker1", Client: client, Kube: kube,
		Informer: f.Crd().V1alpha1().SupportBundleCollections(), Recorder: e.events, TempDir: t.TempDir(),
		Collect: func(_ context.Context, since time.Time, w io.Writer) error {
			if e.inFlight.Add(1) > 1 {
				e.overlap.Add(1)
			}
			defer e.inFlight.Add(-1)
			time.Sleep(5 * time.Millisecond) // long enough for a second worker to overlap, if there were one
			sinceMu.Lock()
			e.since = append(e.since, since)
			sinceMu.Unlock()
			n := e.collected.Add(1)
			_, err := fmt.Fprintf(w, "bundle %d", n)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	ctx := t.Context()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		t.Fatal("informer did not sync")
	}
	return e
}

func (e *env) node(t *testing.T, name, node string) crdv1alpha1.SupportBundleCollectionNodeResult {
	t.Helper()
	sbc, err := e.client.CrdV1alpha1().SupportBundleCollections().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sbc.Status.Nodes {
		if n.Name == node {
			return n
		}
	}
	t.Fatalf("%s has no result of %s", name, node)
	return crdv1alpha1.SupportBundleCollectionNodeResult{}
}

func TestASelectedNodeUploadsItsBundleOnceAndReportsCollected(t *testing.T) {
	e := newEnv(t, collection("sbc", "worker1", "worker2"))
	ctx := t.Context()
	if err := e.c.sync(ctx, "sbc"); err != nil {
		t.Fatal(err)
	}
	got := e.server.got()
	if len(got) != 1 {
		t.Fatalf("%d uploads, want 1", len(got))
	}
	u := got[0]
	if u.name != "worker1_sbc.tar.gz" || u.content != "bundle 1" {
		t.Errorf("uploaded %q with %q, want upstream's worker1_sbc.tar.gz with the bundle", u.name, u.content)
	}
	if u.server.URL != "sftp://files.example:22/root/test" || u.server.Username != "bundles" || u.server.Password != password {
		t.Errorf("uploaded to %s as %s, want the URL with its sftp scheme and the Secret's credentials", u.server.URL, u.server.Username)
	}
	// sinceTime 2h: the logs of the last two hours.
	if d := time.Since(e.since[0]); d < 2*time.Hour || d > 3*time.Hour {
		t.Errorf("collected the logs since %v ago, want 2h", d)
	}
	if n := e.node(t, "sbc", "worker1"); n.State != crdv1alpha1.NodeCollected {
		t.Errorf("worker1's result %+v, want Collected", n)
	}
	if n := e.node(t, "sbc", "worker2"); n.State != crdv1alpha1.NodePending {
		t.Errorf("worker2's result %+v changed, want still Pending", n)
	}
	// Synced again at once (an update queued meanwhile) while the lister
	// still shows worker1 Pending: nothing more.
	stale := collection("sbc", "worker1", "worker2")
	if cur, err := e.c.lister.Get("sbc"); err == nil {
		stale.ObjectMeta = cur.ObjectMeta
	}
	if err := e.c.cfg.Informer.Informer().GetIndexer().Update(stale); err != nil {
		t.Fatal(err)
	}
	if err := e.c.sync(ctx, "sbc"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.server.got()); n != 1 {
		t.Errorf("%d uploads after a second sync on a stale lister, want still 1", n)
	}
}

func TestANodeNotListedOrNotPendingDoesNothing(t *testing.T) {
	done := collection("done", "worker1")
	done.Status.Nodes[0].State = crdv1alpha1.NodeCollected // a finished collection, seen by a restarted agent
	expired := collection("expired", "worker1")
	expired.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-11 * time.Minute))
	e := newEnv(t, collection("other", "worker2"), done, expired)
	for _, name := range []string{"other", "done", "expired"} {
		if err := e.c.sync(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
	if e.collected.Load() != 0 || len(e.server.got()) != 0 {
		t.Errorf("collected %d bundles and uploaded %d, want none", e.collected.Load(), len(e.server.got()))
	}
	if n := e.node(t, "expired", "worker1"); n.State != crdv1alpha1.NodePending {
		t.Errorf("an expired collection's Node %+v, want left Pending for antrea-controller", n)
	}
}

// TestAWrongPasswordFailsTheNodeSayingSoWithoutTheCredentials: the status,
// the Event and the log say "authentication failed" and name the Node; the
// password appears in none of them.
func TestAWrongPasswordFailsTheNodeSayingSoWithoutTheCredentials(t *testing.T) {
	var logs syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&logs)
	defer func() {
		klog.Flush()
		klog.SetOutput(io.Discard)
		klog.LogToStderr(true)
	}()
	e := newEnv(t, collection("sbc", "worker1"))
	// fileserver's own error; a careless one quoting the password too.
	e.server.err = fmt.Errorf("ssh: handshake failed for bundles:%s: %w", password, fileserver.ErrAuthentication)
	if err := e.c.sync(t.Context(), "sbc"); err != nil {
		t.Fatal(err)
	}
	n := e.node(t, "sbc", "worker1")
	if n.State != crdv1alpha1.NodeFailed || !strings.Contains(n.Message, "authentication failed") {
		t.Errorf("worker1's result %+v, want Failed saying authentication failed", n)
	}
	var event string
	select {
	case event = <-e.events.Events:
	default:
	}
	if !strings.HasPrefix(event, "Warning CollectionFailure Node worker1: ") || !strings.Contains(event, "authentication failed") {
		t.Errorf("Event %q, want a Warning naming worker1 and authentication failed", event)
	}
	klog.Flush()
	sbc, _ := e.client.CrdV1alpha1().SupportBundleCollections().Get(t.Context(), "sbc", metav1.GetOptions{})
	status := fmt.Sprintf("%+v", sbc.Status)
	for what, text := range map[string]string{"status": status, "Event": event, "log": logs.String()} {
		if strings.Contains(text, password) {
			t.Errorf("the %s holds the password: %s", what, text)
		}
	}
	if !strings.Contains(logs.String(), "authentication failed") {
		t.Errorf("the log does not say why: %s", logs.String())
	}

	// Another failure quoting the password: redacted too.
	e2 := newEnv(t, collection("sbc2", "worker1"))
	e2.server.err = fmt.Errorf("sftp: open /root/test/.x: permission denied (user bundles, password %s)", password)
	if err := e2.c.sync(t.Context(), "sbc2"); err != nil {
		t.Fatal(err)
	}
	if n := e2.node(t, "sbc2", "worker1"); n.State != crdv1alpha1.NodeFailed || strings.Contains(n.Message, password) ||
		!strings.Contains(n.Message, "permission denied") {
		t.Errorf("worker1's result %+v, want Failed with the server's reason and without the password", n)
	}
}

func TestAMissingSecretFailsTheNodeNamingTheSecret(t *testing.T) {
	sbc := collection("sbc", "worker1")
	sbc.Spec.Authentication.AuthSecret.Name = "nope"
	e := newEnv(t, sbc)
	if err := e.c.sync(t.Context(), "sbc"); err != nil {
		t.Fatal(err)
	}
	if n := e.node(t, "sbc", "worker1"); n.State != crdv1alpha1.NodeFailed || !strings.Contains(n.Message, "Secret default/nope") {
		t.Errorf("worker1's result %+v, want Failed naming Secret default/nope", n)
	}
	if len(e.server.got()) != 0 {
		t.Error("uploaded without credentials")
	}
}

// TestASecretTheAgentMayNotReadSaysWhomToBind: upstream's guide binds
// antrea-controller to the Secret; here the agents read it, and the failure
// says so.
func TestASecretTheAgentMayNotReadSaysWhomToBind(t *testing.T) {
	e := newEnv(t, collection("sbc", "worker1"))
	kube := e.c.cfg.Kube.(*k8sfake.Clientset)
	kube.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "sftp", errors.New("RBAC: access denied"))
	})
	if err := e.c.sync(t.Context(), "sbc"); err != nil {
		t.Fatal(err)
	}
	if n := e.node(t, "sbc", "worker1"); n.State != crdv1alpha1.NodeFailed || !strings.Contains(n.Message, "bind the ServiceAccount kube-system/antrea-agent") {
		t.Errorf("worker1's result %+v, want Failed saying antrea-agent must be bound to the Secret", n)
	}
}

// TestCollectionsRunOneAtATimeAndQueuedOnesRunAfter: Run, given three
// collections at once, collects them all, never two at the same time.
func TestCollectionsRunOneAtATimeAndQueuedOnesRunAfter(t *testing.T) {
	e := newEnv(t, collection("a", "worker1"), collection("b", "worker1"), collection("c", "worker1", "worker2"))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		e.c.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	for _, name := range []string{"a", "b", "c"} {
		waitAPI(t, e, name)
	}
	if n := len(e.server.got()); n != 3 || e.overlap.Load() != 0 {
		t.Errorf("%d uploads, %d overlapping collections; want 3 and none", n, e.overlap.Load())
	}
}

// TestTheBundleReachesARealSFTPServerAndAWrongPasswordSaysSo uploads with
// fileserver.Upload to an SFTP server on loopback (pkg/util/fileserver/
// fileservertest), the host key pinned: the right password leaves the
// bundle under upstream's name, a wrong one fails the Node with
// "authentication failed" and leaves nothing.
func TestTheBundleReachesARealSFTPServerAndAWrongPasswordSaysSo(t *testing.T) {
	srv := fileservertest.Start(t)
	with := func(name string) *crdv1alpha1.SupportBundleCollection {
		sbc := collection(name, "worker1")
		sbc.Spec.FileServer = crdv1alpha1.BundleFileServer{URL: strings.TrimPrefix(srv.URL(), "sftp://"), HostPublicKey: srv.HostKey.Marshal()}
		return sbc
	}
	e := newEnvWith(t, map[string][]byte{"username": []byte(fileservertest.User), "password": []byte(fileservertest.Password)}, with("good"))
	if err := e.c.sync(t.Context(), "good"); err != nil {
		t.Fatal(err)
	}
	if n := e.node(t, "good", "worker1"); n.State != crdv1alpha1.NodeCollected {
		t.Fatalf("worker1's result %+v, want Collected", n)
	}
	data, err := os.ReadFile(filepath.Join(srv.Dir, "worker1_good.tar.gz"))
	if err != nil || string(data) != "bundle 1" {
		t.Fatalf("the server holds %v (%q, %v), want worker1_good.tar.gz with the bundle", srv.Files(t), data, err)
	}

	bad := newEnvWith(t, map[string][]byte{"username": []byte(fileservertest.User), "password": []byte("wrong-" + password)}, with("bad"))
	if err := bad.c.sync(t.Context(), "bad"); err != nil {
		t.Fatal(err)
	}
	n := bad.node(t, "bad", "worker1")
	if n.State != crdv1alpha1.NodeFailed || !strings.Contains(n.Message, "authentication failed") || strings.Contains(n.Message, password) {
		t.Errorf("worker1's result with a wrong password %+v, want Failed saying authentication failed, without the password", n)
	}
	if files := srv.Files(t); len(files) != 1 {
		t.Errorf("the server holds %v after a refused login, want only the first bundle", files)
	}
}

func waitAPI(t *testing.T, e *env, name string) {
	t.Helper()
	for range 1000 {
		sbc, err := e.client.CrdV1alpha1().SupportBundleCollections().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && sbc.Status.Nodes[0].State != crdv1alpha1.NodePending {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("worker1 never reported for %s", name)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
