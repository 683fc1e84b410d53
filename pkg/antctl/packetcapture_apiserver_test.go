package antctl

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/apiserver/agentapitest"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// TestAntctlPacketCaptureSavesTheFileTheAgentHolds: a complete
// PacketCapture whose status.filePath names antrea-agent-x on node-1;
// `antctl packetcapture pc-test -o FILE` from a laptop (the antctl role)
// finds that agent's Node and saves what its agent API serves at
// /packetcaptures/pc-test. Real kube-apiserver with the manifest's CRDs and
// RBAC, real agent API server.
func TestAntctlPacketCaptureSavesTheFileTheAgentHolds(t *testing.T) {
	dir := t.TempDir()
	content := []byte("pcapng bytes of pc-test")
	if err := os.WriteFile(filepath.Join(dir, "pc-test"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	api := agentapitest.Start(t, &agentapi.Querier{NodeName: "node-1"}, func(s *agentapi.Server) {
		s.Handle(packetCapturePath, http.StripPrefix(packetCapturePath, http.FileServer(http.Dir(dir))))
	})
	ctx, kube := api.Ctx, api.Kube
	u, err := url.Parse(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: antreaNamespace, Name: "antrea-agent-x"},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "antrea-agent", Image: "antrea"}}}}
	if _, err := kube.CoreV1().Pods(antreaNamespace).Create(ctx, agent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: antreaNamespace, Name: antreaConfigMap},
		Data: map[string]string{agentconfig.FileName: fmt.Sprintf("apiPort: %s\n", u.Port())}}
	if _, err := kube.CoreV1().ConfigMaps(antreaNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No antrea-controller serves the manifest's admission webhooks here.
	if err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "crdvalidator.antrea.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	crd := versioned.NewForConfigOrDie(api.CP.Config)
	pc, err := crd.CrdV1alpha1().PacketCaptures().Create(ctx, &crdv1alpha1.PacketCapture{ObjectMeta: metav1.ObjectMeta{Name: "pc-test"},
		Spec: crdv1alpha1.PacketCaptureSpec{CaptureConfig: crdv1alpha1.CaptureConfig{FirstN: &crdv1alpha1.PacketCaptureFirstNConfig{Number: 5}},
			Source: crdv1alpha1.Source{Pod: &crdv1alpha1.PodReference{Namespace: "default", Name: "frontend"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pc.Status = crdv1alpha1.PacketCaptureStatus{NumberCaptured: 5, FilePath: "antrea-agent-x:/tmp/antrea/packetcapture/pc-test.pcapng",
		Conditions: []crdv1alpha1.PacketCaptureCondition{{Type: crdv1alpha1.PacketCaptureComplete, Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Reason: "Succeed"}}}
	if _, err := crd.CrdV1alpha1().PacketCaptures().UpdateStatus(ctx, pc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// alice: the antctl role, and reading the Nodes, Pods and ConfigMap.
	viewer := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view-antrea-config"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "nodes", "pods"}, Verbs: []string{"get", "list"}}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, viewer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := agentapitest.Token(t, ctx, kube, "alice", "antctl", "view-antrea-config")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: api.CP.Config.Host, CertificateAuthorityData: api.CP.Config.CAData}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "saved.pcapng")
	var stdout, stderr bytes.Buffer
	var runErr error
	// RBAC reaches the authorizer a moment after it is created.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		stdout.Reset()
		stderr.Reset()
		cmd := NewCommand(Env{Out: &stdout, Err: &stderr})
		cmd.SetArgs([]string{"packetcapture", "pc-test", "-o", out, "--kubeconfig", kubeconfig, "--config-dir", t.TempDir()})
		runErr = cmd.ExecuteContext(ctx)
		return runErr == nil, nil
	})
	if runErr != nil {
		t.Fatalf("antctl packetcapture pc-test: %v\n%s%s", runErr, stdout.String(), stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("saved %q (%v), want the agent's %q", got, err, content)
	}
}
