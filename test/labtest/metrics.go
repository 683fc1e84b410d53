package labtest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/lab"
)

// InControlPlane runs a command in the lab's control-plane netns: a machine
// that reaches kube-apiserver (127.0.0.1:6443 there) and the nodes'
// addresses, as an operator's laptop on the cluster network does.
func InControlPlane(ctx context.Context, argv ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", lab.ControlPlaneNetNS}, argv...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return o.String(), e.String(), err
}

// Scrape GETs url with a bearer token from the control-plane netns and
// returns the HTTP status and body.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	args := []string{"curl", "-sk", "--max-time", "20", "-w", "\n%{http_code}"}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	out, stderr, err := InControlPlane(ctx, append(args, url)...)
	if err != nil {
		return 0, "", fmt.Errorf("curl %s: %w: %s", url, err, stderr)
	}
	i := strings.LastIndex(out, "\n")
	code, _ := strconv.Atoi(strings.TrimSpace(out[i+1:]))
	return code, out[:i], nil
}

// MetricsReaderToken makes (or reuses) the ServiceAccount sa in namespace ns,
// binds it to antrea-metrics-reader (ClusterRoleBinding ns-sa) and returns a
// token of it: a Prometheus scraper's identity. cleanup removes the binding.
func MetricsReaderToken(ctx context.Context, client kubernetes.Interface, ns, sa string) (token string, cleanup func(), err error) {
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "antrea-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, err
	}
	cleanup = func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	}
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return tr.Status.Token, cleanup, nil
}

// AgentMetricsURL is the /metrics of the agent API of the node at nodeIP.
func AgentMetricsURL(nodeIP string) string { return "https://" + nodeIP + ":10350/metrics" }

// CounterByLabel scrapes url and returns the values of the counter name by
// the value of its label (antrea_agent_ovs_flow_ops_count by operation).
func CounterByLabel(ctx context.Context, url, token, name, label string) (map[string]float64, error) {
	code, body, err := Scrape(ctx, url, token)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET %s: %d: %.200s", url, code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out, nil
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == label && m.Counter != nil {
				out[l.GetValue()] += m.Counter.GetValue()
			}
		}
	}
	return out, nil
}
