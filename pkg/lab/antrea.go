package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// The Antrea runtime: antrea-controller in the control-plane netns, and per
// node an OVS instance (userspace datapath), antrea-agent and the antrea-cni
// plugin that the node simulator calls through libcni.
const (
	// ControllerPort is where antrea-controller serves the controlplane API,
	// on the cp netns' loopback (the APIService reaches it as localhost).
	ControllerPort = 10349
	// cniPluginName is the plugin "type" the agent's conflist names.
	cniPluginName = "antrea"
)

// NodeOVSDir is the run directory of a node's OVS instance: its db.sock and
// br-int.mgmt live there, so `ovs-ofctl dump-flows DIR/br-int.mgmt` works.
func (o Options) NodeOVSDir(node string) string { return filepath.Join(o.nodeDir(node), "ovs") }

func (o Options) nodeCNIBinDir(node string) string {
	return filepath.Join(o.nodeDir(node), "cni", "bin")
}

// manifestDir is build/yamls of the repository.
func (o Options) manifestDir() string {
	return filepath.Join(filepath.Dir(o.BinDir), "build", "yamls")
}

// startAntreaNode starts the node's OVS daemons inside the node netns and
// antrea-agent with enter (the node's namespaces), and puts the antrea-cni
// plugin where the node's runtime looks.
func (s *supervisor) startAntreaNode(ctx context.Context, n NodeInfo, c *credentials, enter []string) error {
	in, err := ovsinstance.New(ovsinstance.Config{Dir: s.opts.NodeOVSDir(n.Name), NetNS: n.NetNS})
	if err != nil {
		return fmt.Errorf("OVS of node %s: %w", n.Name, err)
	}
	if err := in.CreateDB(); err != nil {
		return fmt.Errorf("OVS of node %s: %w", n.Name, err)
	}
	// ovs-vswitchd runs inside the node netns: its internal ports (br-int,
	// antrea-gw0, br-phy) are created where it runs. OVS_* select the instance.
	ovsEnter := append(append([]string{"env"}, in.EnvVars()...), "ip", "netns", "exec", n.NetNS)
	if _, err := s.startDaemonWith("ovsdb-server", n.Name, n.NetNS, ovsEnter, "ovsdb-server", in.DBServerArgs()...); err != nil {
		return err
	}
	if _, err := s.startDaemonWith("ovs-vswitchd", n.Name, n.NetNS, ovsEnter, "ovs-vswitchd", in.VSwitchdArgs()...); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := in.WaitReady(waitCtx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := in.RecordVersion(); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}

	binDir := s.opts.nodeCNIBinDir(n.Name)
	confDir := s.opts.NodesimConfig(n, "").CNIConfDir
	socket := filepath.Join(s.opts.nodeDir(n.Name), "antrea", "cni.sock")
	ipamDir := filepath.Join(s.opts.NodesimConfig(n, "").StateDir, "antrea-ipam")
	if s.opts.Kubelet == KubeletReal {
		// The node's own /opt/cni/bin, /etc/cni/net.d, /var/run/antrea and
		// /var/lib/antrea, as the agent finds them on any node.
		binDir = s.opts.NodeHostPath(n.Name, "/opt/cni/bin")
		confDir = s.opts.NodeHostPath(n.Name, "/etc/cni/net.d")
		socket = filepath.Join(s.opts.NodeHostPath(n.Name, "/var/run/antrea"), "cni.sock")
		ipamDir = filepath.Join(s.opts.NodeHostPath(n.Name, "/var/lib/antrea"), "ipam")
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	plugin := filepath.Join(binDir, cniPluginName)
	_ = os.Remove(plugin)
	if err := os.Symlink(filepath.Join(s.opts.BinDir, "antrea-cni"), plugin); err != nil {
		return fmt.Errorf("install antrea-cni for node %s: %w", n.Name, err)
	}
	_, err = s.startDaemonWith("antrea-agent", n.Name, n.NetNS, enter,
		filepath.Join(s.opts.BinDir, "antrea-agent"),
		"--kubeconfig="+c.kubeconfigs["antrea-agent"],
		// The controller listens on the control plane's loopback here,
		// out of the nodes' reach: through kube-apiserver.
		"--controlplane-through-kube-apiserver",
		"--node-name="+n.Name,
		"--ovs-run-dir="+in.Dir(),
		"--ovs-datapath=netdev",
		"--tunnel-type="+s.opts.Encap,
		"--traffic-encap-mode="+s.opts.trafficMode(),
		"--uplink=eth0",
		"--cni-socket="+socket,
		"--cni-conf-dir="+confDir,
		"--ipam-data-dir="+ipamDir)
	return err
}

// startAntreaController applies the RBAC of Antrea's manifest and the
// simulator's APIService, then starts antrea-controller in the cp netns and
// waits until kube-apiserver reports its APIService Available. This is the
// node simulator's way; real nodes install Antrea from its manifest
// (installAntrea).
func (s *supervisor) startAntreaController(ctx context.Context, c *credentials) error {
	cfg := s.restConfig(c)
	manifest, err := os.ReadFile(s.opts.SourceManifest())
	if err != nil {
		return fmt.Errorf("read the Antrea manifest (make manifests): %w", err)
	}
	if err := applyManifest(ctx, cfg, s.opts.SourceManifest(), manifest, IsRBAC); err != nil {
		return err
	}
	if err := applyManifest(ctx, cfg, "loopback APIService", apiserver.LoopbackRegistration(ControllerPort), nil); err != nil {
		return err
	}
	kc := c.kubeconfigs["antrea-controller"]
	d, err := s.startDaemon("antrea-controller", "", ControlPlaneNetNS, filepath.Join(s.opts.BinDir, "antrea-controller"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ControllerPort),
		"--cert-dir="+filepath.Join(s.opts.Dir, "antrea-controller"))
	if err != nil {
		return err
	}
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return d.waitUntil(ctx, "APIService "+controlplaneAPIService+" Available", func(ctx context.Context) bool {
		as, err := agg.ApiregistrationV1().APIServices().Get(ctx, controlplaneAPIService, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range as.Status.Conditions {
			if cond.Type == apiregistrationv1.Available {
				return cond.Status == apiregistrationv1.ConditionTrue
			}
		}
		return false
	})
}

// IsRBAC keeps the ServiceAccounts, roles and bindings of a manifest.
func IsRBAC(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.Role, *rbacv1.ClusterRoleBinding, *rbacv1.RoleBinding:
		return true
	}
	return false
}

// applyManifest creates every object of a YAML manifest that keep accepts
// (nil: all). Bindings to the kube-system/antrea-* ServiceAccounts are also
// bound to the users of the same name, which is how the simulator lab's
// components authenticate (client certificates), so the manifest stays the
// single source of RBAC.
func applyManifest(ctx context.Context, cfg *rest.Config, what string, data []byte, keep func(runtime.Object) bool) error {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	agg, err := aggregatorclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiregistrationv1.AddToScheme(scheme)
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	docs, err := splitYAML(data)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, doc := range docs {
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if keep != nil && !keep(obj) {
			continue
		}
		if err := apply(ctx, kc, agg, obj); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

func stripComments(doc []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// withUsers adds a User subject for every kube-system/antrea-* ServiceAccount.
func withUsers(subjects []rbacv1.Subject) []rbacv1.Subject {
	out := append([]rbacv1.Subject(nil), subjects...)
	for _, s := range subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "kube-system" && strings.HasPrefix(s.Name, "antrea-") {
			out = append(out, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: s.Name})
		}
	}
	return out
}

func apply(ctx context.Context, kc kubernetes.Interface, agg aggregatorclient.Interface, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = kc.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		_, err = kc.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		_, err = kc.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = kc.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		o.Subjects = withUsers(o.Subjects)
		_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		o.Subjects = withUsers(o.Subjects)
		_, err = kc.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *apiregistrationv1.APIService:
		_, err = agg.ApiregistrationV1().APIServices().Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("unsupported manifest kind %T", obj)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil // a lab's cluster is new: an existing object is our own from this run
	}
	return err
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
