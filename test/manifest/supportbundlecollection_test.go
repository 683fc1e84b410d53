package manifest

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsbc "antrea.io/antrea/pkg/agent/supportbundlecollection"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/util/fileserver"
	"antrea.io/antrea/pkg/util/fileserver/fileservertest"
)

// TestUpstreamSupportBundleCollectionExamplesApply applies the
// SupportBundleCollection CRD to a real kube-apiserver, then each example of
// docs/support-bundle-guide.md (upstream's, unchanged) with kubectl's strict
// field validation: the schema accepts them without a warning and reads back
// what they say (with upstream's default expirationMinutes). Then the
// printer columns show a status, and the schema refuses a collection of no
// Nodes.
func TestUpstreamSupportBundleCollectionExamplesApply(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/support-bundle-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, block := range strings.Split(string(doc), "cat << EOF | kubectl apply -f -\n")[1:] {
		block, _, _ = strings.Cut(block, "\nEOF\n")
		if strings.Contains(block, "kind: SupportBundleCollection\n") {
			examples = append(examples, block)
		}
	}
	if len(examples) != 2 {
		t.Fatalf("docs/support-bundle-guide.md has %d SupportBundleCollection examples, want upstream's 2", len(examples))
	}
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "supportbundlecollections")
	for i, want := range []struct{ name, fields, stored string }{
		{"support-bundle-for-nodes",
			`{.spec.nodes.nodeNames[0]} {.spec.nodes.matchLabels.role} {.spec.expirationMinutes} {.spec.sinceTime} {.spec.fileServer.url} {.spec.authentication.authSecret.name}`,
			"worker1 workers 10 2h sftp://yourtestdomain.com:22/root/test support-bundle-secret"},
		{"support-bundle-for-vms",
			`{.spec.externalNodes.namespace} {.spec.externalNodes.nodeSelector.matchLabels.role} {.spec.expirationMinutes} {.spec.fileServer.url} {.spec.authentication.authType}`,
			"vm-ns vms 60 yourtestdomain.com:22/root/test BasicAuthentication"},
	} {
		out, errOut := k.run([]byte(examples[i]), "apply", "--validate=strict", "-f", "-")
		if !strings.Contains(out, "supportbundlecollection.crd.antrea.io/"+want.name) || strings.TrimSpace(errOut) != "" {
			t.Errorf("example %d: kubectl apply said %q, warned %q", i, out, errOut)
		}
		if got, _ := k.run(nil, "get", "supportbundlecollection", want.name, "-o", "jsonpath="+want.fields); got != want.stored {
			t.Errorf("example %d stored as %q, want %q", i, got, want.stored)
		}
	}

	// The printer columns, on a status as antrea-controller writes it.
	k.run([]byte(`{"status":{"desiredNodes":3,"collectedNodes":2,"conditions":[`+
		`{"type":"Completed","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"},`+
		`{"type":"CollectionFailure","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","message":"Node worker3: authentication failed"}],`+
		`"nodes":[{"name":"worker3","state":"Failed","message":"authentication failed"}]}}`),
		"patch", "sbc", "support-bundle-for-nodes", "--subresource=status", "--type=merge", "--patch-file=/dev/stdin")
	out, _ := k.run(nil, "get", "supportbundlecollections", "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	if strings.Join(header, " ") != "NAME DESIRED COLLECTED COMPLETED FAILURE FAILED-NODES FILE-SERVER AGE" {
		t.Errorf("columns %v", header)
	}
	if !strings.Contains(out, "support-bundle-for-nodes   3         2           True        True      Node worker3: authentication failed") {
		t.Errorf("kubectl get -o wide:\n%s\nwant the counts, conditions and the failed Node", out)
	}

	// The schema's own rule: Nodes or ExternalNodes.
	none := []byte("apiVersion: crd.antrea.io/v1alpha1\nkind: SupportBundleCollection\nmetadata:\n  name: none\nspec:\n" +
		"  fileServer:\n    url: sftp://files.example:22/up\n  authentication:\n    authType: BasicAuthentication\n" +
		"    authSecret:\n      name: s\n      namespace: default\n")
	_, errOut, err := run(t, none, k.path, "--kubeconfig", k.kubeconfig, "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(string(errOut), "one of nodes and externalNodes must be set") {
		t.Errorf("a collection of no Nodes: kubectl apply said %v: %s; want the schema's refusal", err, errOut)
	}
}

// supportBundleCollectionAsServiceAccounts runs a SupportBundleCollection
// of two Nodes through the manifest's webhook and RBAC: antrea-controller
// (already running, as its ServiceAccount) selects them; two agents' controllers
// (pkg/agent/supportbundlecollection) as antrea-agent read the Secret
// through docs/support-bundle-guide.md's Role and RoleBinding, and upload
// to an SFTP server on loopback, n2's with a wrong password. The collection
// completes with n1 collected (its bundle on the server) and n2 failed
// saying "authentication failed", a Warning Event, and the password in
// neither. The webhook refuses expirationMinutes 0 and a spec change.
func supportBundleCollectionAsServiceAccounts(t *testing.T, ctx context.Context, cp *apiservertest.ControlPlane, agentUser *envtest.AuthenticatedUser) {
	t.Helper()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	crd := versioned.NewForConfigOrDie(cp.Config).CrdV1alpha1()
	for _, n := range []string{"n1", "n2"} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil &&
			!apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	srv := fileservertest.Start(t)
	const secretNS, secretName = "bundles", "support-bundle-secret"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(secretNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName},
		Data: map[string][]byte{"username": []byte(fileservertest.User), "password": []byte(fileservertest.Password)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The guide's Role and RoleBinding, as written there.
	doc, err := os.ReadFile(repoPath("docs/support-bundle-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rbac string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: RoleBinding") {
			rbac = strings.ReplaceAll(block, "namespace: default", "namespace: "+secretNS)
		}
	}
	if rbac == "" {
		t.Fatal("docs/support-bundle-guide.md has no RoleBinding example")
	}
	newKubectl(t, cp).run([]byte(rbac), "apply", "-f", "-")

	// The webhook, as kube-apiserver calls it.
	sbc := &crdv1alpha1.SupportBundleCollection{ObjectMeta: metav1.ObjectMeta{Name: "sbc"},
		Spec: crdv1alpha1.SupportBundleCollectionSpec{Nodes: &crdv1alpha1.BundleNodes{NodeNames: []string{"n1", "n2"}},
			ExpirationMinutes: 0, SinceTime: "2h",
			FileServer: crdv1alpha1.BundleFileServer{URL: srv.URL(), HostPublicKey: srv.HostKey.Marshal()},
			Authentication: crdv1alpha1.BundleServerAuthConfiguration{AuthType: crdv1alpha1.BasicAuthentication,
				AuthSecret: &corev1.SecretReference{Name: secretName, Namespace: secretNS}}}}
	if _, err := crd.SupportBundleCollections().Create(ctx, sbc, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "spec.expirationMinutes") {
		t.Errorf("a collection with expirationMinutes 0: %v, want the webhook's refusal naming the field", err)
	}

	// The agents of n1 and n2, as antrea-agent.
	agentCRD := versioned.NewForConfigOrDie(agentUser.Config())
	agentKube := kubernetes.NewForConfigOrDie(agentUser.Config())
	agentCtx, stopAgents := context.WithCancel(ctx)
	var agents sync.WaitGroup
	defer func() {
		stopAgents()
		agents.Wait()
	}()
	for _, node := range []string{"n1", "n2"} {
		upload := fileserver.Upload
		if node == "n2" {
			upload = func(ctx context.Context, s fileserver.Server, name string, r io.Reader) error {
				s.Password = "not-" + s.Password
				return fileserver.Upload(ctx, s, name, r)
			}
		}
		f := crdinformers.NewSharedInformerFactory(agentCRD, 0)
		events := record.NewBroadcaster(record.WithContext(agentCtx))
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: agentKube.CoreV1().Events("")})
		c, err := agentsbc.NewController(agentsbc.Config{NodeName: node, Client: agentCRD, Kube: agentKube,
			Informer: f.Crd().V1alpha1().SupportBundleCollections(), Upload: upload, TempDir: t.TempDir(),
			Recorder: events.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: node}),
			Collect: func(_ context.Context, _ time.Time, w io.Writer) error {
				_, err := io.WriteString(w, "the bundle of "+node)
				return err
			}})
		if err != nil {
			t.Fatal(err)
		}
		f.Start(agentCtx.Done())
		agents.Add(1)
		go func() {
			defer agents.Done()
			c.Run(agentCtx)
			f.Shutdown()
			events.Shutdown()
		}()
	}

	sbc.Spec.ExpirationMinutes = 5
	if _, err := crd.SupportBundleCollections().Create(ctx, sbc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *crdv1alpha1.SupportBundleCollection
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := crd.SupportBundleCollections().Get(ctx, "sbc", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = s
		for _, c := range s.Status.Conditions {
			if c.Type == crdv1alpha1.CollectionCompleted && c.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the collection never completed as the ServiceAccounts: status %+v", got.Status)
	}
	status, _ := json.Marshal(got.Status)
	if got.Status.DesiredNodes != 2 || got.Status.CollectedNodes != 1 ||
		!strings.Contains(string(status), `"message":"Node n2: uploading n2_sbc.tar.gz: authentication failed`) ||
		strings.Contains(string(status), fileservertest.Password) {
		t.Errorf("status %s: want 2 desired, 1 collected, n2's authentication failure named, and no password", status)
	}
	if data, err := os.ReadFile(filepath.Join(srv.Dir, "n1_sbc.tar.gz")); err != nil || string(data) != "the bundle of n1" {
		t.Errorf("n1's bundle on the server: %q, %v (the server holds %v)", data, err, srv.Files(t))
	}
	if files := srv.Files(t); len(files) != 1 {
		t.Errorf("the server holds %v, want only n1's bundle", files)
	}
	var warning string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ev, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=sbc"})
		if err != nil {
			return false, nil
		}
		for _, e := range ev.Items {
			if strings.Contains(e.Message, fileservertest.Password) {
				t.Errorf("Event %q holds the password", e.Message)
			}
			if e.Type == corev1.EventTypeWarning && e.Source.Host == "n2" {
				warning = e.Message
			}
		}
		return warning != "", nil
	})
	if err != nil || !strings.Contains(warning, "Node n2: uploading n2_sbc.tar.gz: authentication failed") {
		t.Errorf("n2's agent's Warning Event %q (%v), want it naming the authentication failure", warning, err)
	}

	// A started collection's spec cannot change; its labels can.
	s, err := crd.SupportBundleCollections().Get(ctx, "sbc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.ExpirationMinutes = 10
	if _, err := crd.SupportBundleCollections().Update(ctx, s, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec: Forbidden") {
		t.Errorf("changing a started collection's spec: %v, want the webhook's refusal", err)
	}
}
