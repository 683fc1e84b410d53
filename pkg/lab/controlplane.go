package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"
)

// credentials are the PKI and the kubeconfig files of every lab user.
type credentials struct {
	pki   *pki
	files pkiFiles
	admin *keyPair
	// kubeconfigs by user: "admin" (host, via the relay), "admin-in-lab",
	// "controller-manager", "scheduler", "antrea-controller", "antrea-agent",
	// and one per node name.
	kubeconfigs map[string]string
	// kubelets are the files of each real node's kubelet, by node name.
	kubelets map[string]nodeKubeletFiles
	// kubeletClientCert and kubeletClientKey are the API server's client
	// credentials towards kubelets (exec, logs, port-forward).
	kubeletClientCert, kubeletClientKey string
}

func (s *supervisor) kubeconfigDir() string { return filepath.Join(s.opts.Dir, "kubeconfigs") }

// writeCredentials makes the PKI and a kubeconfig per user. Components in
// the cp netns reach the API server on its loopback; nodes on the underlay.
func (s *supervisor) writeCredentials(nodes []NodeInfo) (*credentials, error) {
	cpIP := controlPlaneIP()
	p, err := newPKI(net.IP(cpIP.AsSlice()), net.IP(underlayV6(cpIP).AsSlice()))
	if err != nil {
		return nil, err
	}
	files, err := p.write(s.opts.pkiDir())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.kubeconfigDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create kubeconfig dir: %w", err)
	}
	local := fmt.Sprintf("https://127.0.0.1:%d", APIServerPort)
	underlay := s.opts.apiServerURL()
	c := &credentials{pki: p, files: files, kubeconfigs: map[string]string{}, kubelets: map[string]nodeKubeletFiles{}}
	if err := s.writeKubeletCredentials(c, nodes); err != nil {
		return nil, err
	}
	type user struct {
		name, cn string
		groups   []string
		server   string
		path     string
	}
	users := []user{
		{name: "admin", cn: "kubernetes-admin", groups: []string{"system:masters"}, server: local, path: s.opts.KubeconfigPath()},
		{name: "admin-in-lab", cn: "kubernetes-admin", groups: []string{"system:masters"}, server: underlay},
		{name: "controller-manager", cn: "system:kube-controller-manager", server: local},
		{name: "scheduler", cn: "system:kube-scheduler", server: local},
		{name: "antrea-controller", cn: "antrea-controller", server: local},
		{name: "antrea-agent", cn: "antrea-agent", server: underlay},
	}
	for _, n := range nodes {
		users = append(users, user{name: n.Name, cn: "system:node:" + n.Name, groups: []string{"system:nodes"}, server: underlay})
	}
	for _, u := range users {
		kp, err := p.CA.clientCert(u.cn, u.groups...)
		if err != nil {
			return nil, err
		}
		if u.name == "admin" {
			c.admin = kp
		}
		path := u.path
		if path == "" {
			path = filepath.Join(s.kubeconfigDir(), u.name+".kubeconfig")
		}
		if err := writeKubeconfig(path, u.server, p.CA.CertPEM, kp); err != nil {
			return nil, err
		}
		c.kubeconfigs[u.name] = path
	}
	return c, nil
}

// writeKubeletCredentials issues each node's kubelet serving certificate
// (for its name and IP) and the API server's client certificate for kubelets.
func (s *supervisor) writeKubeletCredentials(c *credentials, nodes []NodeInfo) error {
	client, err := c.pki.CA.clientCert("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	c.kubeletClientCert = filepath.Join(s.opts.pkiDir(), "apiserver-kubelet-client.crt")
	c.kubeletClientKey = filepath.Join(s.opts.pkiDir(), "apiserver-kubelet-client.key")
	if err := writeKeyPair(client, c.kubeletClientCert, c.kubeletClientKey); err != nil {
		return err
	}
	for _, n := range nodes {
		ips := []net.IP{net.ParseIP(n.IP)}
		if n.IPv6 != "" {
			ips = append(ips, net.ParseIP(n.IPv6))
		}
		kp, err := c.pki.CA.issue(certSpec{commonName: n.Name, dnsNames: []string{n.Name}, ips: ips, server: true})
		if err != nil {
			return err
		}
		dir := filepath.Join(s.opts.kubeletDir(n.Name), "pki")
		kf := nodeKubeletFiles{
			servingCert: filepath.Join(dir, "kubelet.crt"),
			servingKey:  filepath.Join(dir, "kubelet.key"),
			clientCA:    c.files.CACert,
		}
		if err := writeKeyPair(kp, kf.servingCert, kf.servingKey); err != nil {
			return err
		}
		c.kubelets[n.Name] = kf
	}
	return nil
}

// writeKeyPair writes a certificate and its key (mode 0600).
func writeKeyPair(kp *keyPair, certPath, keyPath string) error {
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return fmt.Errorf("create dir of %s: %w", certPath, err)
	}
	if err := os.WriteFile(certPath, kp.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certPath, err)
	}
	if err := os.WriteFile(keyPath, kp.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keyPath, err)
	}
	return nil
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler in the cp netns, each waited for before the next.
func (s *supervisor) startControlPlane(ctx context.Context, c *credentials) error {
	bin := func(name string) string { return filepath.Join(s.opts.KubeBinDir, name) }
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(bin(b)); err != nil {
			return fmt.Errorf("%s is missing (run hack/install.sh): %w", bin(b), err)
		}
	}
	s.logf("starting etcd")
	etcd, err := s.startDaemon("etcd", "", ControlPlaneNetNS, bin("etcd"),
		"--name=lab",
		"--data-dir="+s.opts.etcdDir(),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=lab=http://127.0.0.1:2380",
		// The lab is disposable: no fsync makes it start and write fast on shared disks.
		"--unsafe-no-fsync",
		"--log-level=warn")
	if err != nil {
		return err
	}
	if err := etcd.waitUntil(ctx, "etcd health", func(ctx context.Context) bool {
		return s.httpGetInNetNS(ctx, "http://127.0.0.1:2379/health") == nil
	}); err != nil {
		return err
	}

	serviceCIDRs := s.opts.serviceCIDRs()
	s.logf("starting kube-apiserver (advertise %s, services %s)", s.opts.apiServerIP(), serviceCIDRs)
	f := c.files
	// With real nodes the aggregator dials the endpoints of an APIService's
	// Service (antrea-controller's node IP: it is hostNetwork) rather than
	// its ClusterIP, which nothing realizes in the control plane's netns (no
	// kube-proxy there). The node simulator's controller runs in this netns
	// behind an ExternalName Service, which only the default routing takes.
	apiserver, err := s.startDaemon("kube-apiserver", "", ControlPlaneNetNS, bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		// "::" takes both families: the nodes of an IPv6-only lab
		// dial its IPv6 address, the lab's relay its IPv4 one.
		"--bind-address=::",
		fmt.Sprintf("--secure-port=%d", APIServerPort),
		"--advertise-address="+s.opts.apiServerIP().String(),
		"--service-cluster-ip-range="+serviceCIDRs,
		"--tls-cert-file="+f.APIServerCert,
		"--tls-private-key-file="+f.APIServerKey,
		"--client-ca-file="+f.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+f.SAPub,
		"--service-account-signing-key-file="+f.SAKey,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		// Aggregated API servers (antrea-controller) authenticate the API
		// server's proxied requests with the front-proxy client certificate.
		"--requestheader-client-ca-file="+f.FrontProxyCACert,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+f.ProxyClientCert,
		"--proxy-client-key-file="+f.ProxyClientKey,
		fmt.Sprintf("--enable-aggregator-routing=%t", s.opts.Kubelet == KubeletReal),
		// exec, logs and port-forward go to the node's kubelet, which
		// serves a certificate of the lab CA for the node's IP.
		"--kubelet-client-certificate="+c.kubeletClientCert,
		"--kubelet-client-key="+c.kubeletClientKey,
		"--kubelet-certificate-authority="+f.CACert,
		"--kubelet-preferred-address-types=InternalIP",
		"--cert-dir="+filepath.Join(s.opts.Dir, "apiserver-certs"))
	if err != nil {
		return err
	}
	client, err := s.apiClient(c)
	if err != nil {
		return err
	}
	s.client = client
	if err := apiserver.waitUntil(ctx, "kube-apiserver /readyz", func(ctx context.Context) bool {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	}); err != nil {
		return err
	}

	if err := bootstrapCluster(ctx, client); err != nil {
		return err
	}

	// A dual-stack lab: each node gets a pod CIDR of each family, IPv4
	// first (the agent's primary family), and Services a ClusterIP range
	// of each; an IPv6-only lab: IPv6 ones alone.
	cidrFlags := s.opts.clusterCIDRFlags()
	s.logf("starting kube-controller-manager (%s) and kube-scheduler", strings.Join(cidrFlags, " "))
	cm := c.kubeconfigs["controller-manager"]
	cmArgs := append([]string{
		"--kubeconfig=" + cm,
		"--authentication-kubeconfig=" + cm,
		"--authorization-kubeconfig=" + cm,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--allocate-node-cidrs=true",
		"--service-cluster-ip-range=" + serviceCIDRs,
		"--service-account-private-key-file=" + f.SAKey,
		"--root-ca-file=" + f.CACert,
		"--use-service-account-credentials=true",
		"--controllers=*",
		"--cluster-signing-cert-file=" + f.CACert,
		"--cluster-signing-key-file=" + f.CAKey,
	}, cidrFlags...)
	if _, err := s.startDaemon("kube-controller-manager", "", ControlPlaneNetNS, bin("kube-controller-manager"), cmArgs...); err != nil {
		return err
	}
	sched := c.kubeconfigs["scheduler"]
	if _, err := s.startDaemon("kube-scheduler", "", ControlPlaneNetNS, bin("kube-scheduler"),
		"--kubeconfig="+sched,
		"--authentication-kubeconfig="+sched,
		"--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1",
		"--leader-elect=false"); err != nil {
		return err
	}
	klog.InfoS("Control plane started", "apiserver", s.opts.apiServerIP().String())
	return nil
}
