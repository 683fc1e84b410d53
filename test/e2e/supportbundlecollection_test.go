package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/supportbundle"
	"antrea.io/antrea/test/labtest"
)

// TestSupportBundleCollectionUploadsEachNodesBundle judges
// SupportBundleCollection on real nodes, with the lab's SFTP server (OpenSSH
// internal-sftp on the outside host) and the RoleBinding of
// docs/support-bundle-guide.md for the agents on the Secret. With a wrong
// password every Node fails saying "authentication failed", the collection
// completes with CollectionFailure naming them and nothing lands on the
// server; with the right one each Node's bundle lands as
// <node>_<collection>.tar.gz, a bundle of that node, and the collection
// completes with every Node collected. The password is in no status,
// Event or bundle.
func TestSupportBundleCollectionUploadsEachNodesBundle(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := e.Opts.SFTPHostPublicKey()
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("sbc-e2e-%d", time.Now().UnixNano()%100000)
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	// The guide's Role and RoleBinding: the agents read this one Secret.
	const secretName = "support-bundle-secret"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "antrea-read-support-bundle-secret"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secretName}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "antrea-agent", Namespace: "kube-system"}}}
	if _, err := e.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wrongPassword := "not-" + lab.SFTPPassword
	setPassword := func(password string) {
		t.Helper()
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName},
			Data: map[string][]byte{"username": []byte(lab.SFTPUser), "password": []byte(password)}}
		_ = e.Client.CoreV1().Secrets(ns).Delete(ctx, secretName, metav1.DeleteOptions{})
		if _, err := e.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	uploadDir := e.Opts.SFTPUploadDir()

	// collect creates a collection of every lab node and returns it once
	// it completed.
	collect := func(name string) *crdv1alpha1.SupportBundleCollection {
		t.Helper()
		sbc := &crdv1alpha1.SupportBundleCollection{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: crdv1alpha1.SupportBundleCollectionSpec{
				Nodes:             &crdv1alpha1.BundleNodes{NodeNames: e.Nodes},
				ExpirationMinutes: 3, SinceTime: "1h",
				FileServer: crdv1alpha1.BundleFileServer{URL: lab.SFTPURL(), HostPublicKey: hostKey},
				Authentication: crdv1alpha1.BundleServerAuthConfiguration{AuthType: crdv1alpha1.BasicAuthentication,
					AuthSecret: &corev1.SecretReference{Name: secretName, Namespace: ns}},
			}}
		if _, err := crd.CrdV1alpha1().SupportBundleCollections().Create(ctx, sbc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = crd.CrdV1alpha1().SupportBundleCollections().Delete(context.Background(), name, metav1.DeleteOptions{})
			for _, n := range e.Nodes {
				_ = os.Remove(filepath.Join(uploadDir, crdv1alpha1.BundleFileName(n, name)))
			}
		})
		var done *crdv1alpha1.SupportBundleCollection
		labtest.WaitFor(t, ctx, name+" completed", func() error {
			got, err := crd.CrdV1alpha1().SupportBundleCollections().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c := sbcCondition(got, crdv1alpha1.CollectionCompleted); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("status %+v", got.Status)
			}
			done = got
			return nil
		})
		status, _ := json.Marshal(done.Status)
		if bytes.Contains(status, []byte(lab.SFTPPassword)) {
			t.Errorf("%s: the status holds the password: %s", name, status)
		}
		return done
	}

	setPassword(wrongPassword)
	bad := collect("e2e-bad-password")
	failure := sbcCondition(bad, crdv1alpha1.CollectionFailure)
	if bad.Status.DesiredNodes != int32(len(e.Nodes)) || bad.Status.CollectedNodes != 0 || failure == nil || failure.Status != metav1.ConditionTrue {
		t.Errorf("with a wrong password: status %+v, want %d desired, none collected, CollectionFailure", bad.Status, len(e.Nodes))
	}
	for _, n := range e.Nodes {
		if failure != nil && !strings.Contains(failure.Message, "Node "+n+": uploading "+crdv1alpha1.BundleFileName(n, bad.Name)+": authentication failed") {
			t.Errorf("CollectionFailure %q does not say %s's authentication failed", failure.Message, n)
		}
	}
	events, err := e.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + bad.Name})
	if err != nil {
		t.Fatal(err)
	}
	warnings := 0
	for _, ev := range events.Items {
		if strings.Contains(ev.Message, wrongPassword) {
			t.Errorf("Event %q holds the password", ev.Message)
		}
		if ev.Type == corev1.EventTypeWarning && ev.Reason == string(crdv1alpha1.CollectionFailure) {
			warnings++
		}
	}
	if warnings == 0 {
		t.Errorf("no Warning CollectionFailure Event on %s: %+v", bad.Name, events.Items)
	}
	if entries, _ := os.ReadDir(uploadDir); len(entriesOf(entries, bad.Name)) != 0 {
		t.Errorf("%s holds %v after refused logins", uploadDir, entriesOf(entries, bad.Name))
	}

	setPassword(lab.SFTPPassword)
	good := collect("e2e-good-password")
	if good.Status.CollectedNodes != int32(len(e.Nodes)) {
		t.Errorf("with the right password: status %+v, want every node collected", good.Status)
	}
	if c := sbcCondition(good, crdv1alpha1.CollectionFailure); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("CollectionFailure %+v, want False", c)
	}
	for _, n := range e.Nodes {
		path := filepath.Join(uploadDir, crdv1alpha1.BundleFileName(n, good.Name))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("node %s's bundle: %v", n, err)
			continue
		}
		if bytes.Contains(data, []byte(lab.SFTPPassword)) {
			t.Errorf("%s holds the password", path)
		}
		entries, err := supportbundle.Read(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s is not a bundle: %v", path, err)
			continue
		}
		var summary supportbundle.Summary
		if err := json.Unmarshal(entries[supportbundle.SummaryName], &summary); err != nil || summary.Node != n || summary.Component != "antrea-agent" {
			t.Errorf("%s: summary %+v (%v), want antrea-agent's bundle of %s", path, summary, err, n)
		}
		if _, ok := entries["ovs/flows.txt"]; !ok {
			t.Errorf("%s has no ovs/flows.txt", path)
		}
	}
	if entries, _ := os.ReadDir(uploadDir); len(entriesOf(entries, good.Name)) != len(e.Nodes) {
		t.Errorf("%s holds %v for %s, want one file per node (no temporary file left)", uploadDir, entriesOf(entries, good.Name), good.Name)
	}
}

func sbcCondition(sbc *crdv1alpha1.SupportBundleCollection, t crdv1alpha1.SupportBundleCollectionConditionType) *crdv1alpha1.SupportBundleCollectionCondition {
	for i := range sbc.Status.Conditions {
		if sbc.Status.Conditions[i].Type == t {
			return &sbc.Status.Conditions[i]
		}
	}
	return nil
}

// entriesOf are the names of entries that mention the collection.
func entriesOf(entries []os.DirEntry, collection string) []string {
	var names []string
	for _, e := range entries {
		if strings.Contains(e.Name(), collection) {
			names = append(names, e.Name())
		}
	}
	return names
}
