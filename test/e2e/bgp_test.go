package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// routerTable reads the lab router's table with its own CLI (birdc on the
// host, through BIRD's socket): each prefix with the next hops of its
// routes.
func routerTable(ctx context.Context, sock string) (map[netip.Prefix][]string, error) {
	out, err := exec.CommandContext(ctx, "birdc", "-s", sock, "show", "route", "all").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("birdc show route all: %v: %s", err, out)
	}
	return parseBirdRoutes(string(out)), nil
}

// parseBirdRoutes reads `birdc show route all`: a route line starts with
// its prefix (a further route of the same prefix starts with blanks), its
// attributes follow, among them BGP.next_hop.
func parseBirdRoutes(out string) map[netip.Prefix][]string {
	table := map[netip.Prefix][]string{}
	var cur netip.Prefix
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			if p, err := netip.ParsePrefix(fields[0]); err == nil {
				cur = p
			}
			continue
		}
		if fields[0] == "BGP.next_hop:" && len(fields) > 1 && cur.IsValid() {
			table[cur] = append(table[cur], fields[1])
		}
	}
	for p := range table {
		slices.Sort(table[p])
	}
	return table
}

func TestParseBirdRoutes(t *testing.T) {
	out := `BIRD 2.0.12 ready.
Table master4:
10.96.12.7/32        unicast [node1 20:41:02.118] * (100) [AS64512i]
	via 172.30.0.11 on v-router
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 64512
	BGP.next_hop: 172.30.0.11
	BGP.local_pref: 100
                     unicast [node2 20:41:02.344] (100) [AS64512i]
	via 172.30.0.12 on v-router
	Type: BGP univ
	BGP.next_hop: 172.30.0.12
10.10.0.0/24         unicast [node1 20:40:58.001] * (100) [AS64512i]
	via 172.30.0.11 on v-router
	BGP.next_hop: 172.30.0.11
`
	got := parseBirdRoutes(out)
	if fmt.Sprint(got[netip.MustParsePrefix("10.96.12.7/32")]) != "[172.30.0.11 172.30.0.12]" ||
		fmt.Sprint(got[netip.MustParsePrefix("10.10.0.0/24")]) != "[172.30.0.11]" || len(got) != 2 {
		t.Errorf("parsed %v", got)
	}
}

// TestBGPPolicyAdvertisesToTheLabRouter: a BGPPolicy selecting every node
// with the lab's router (BIRD) as peer makes each node advertise its Pod
// CIDR, every Service's ClusterIP and LoadBalancer IP, and the Egress IPs it
// holds (only the holder), which the router learns with the advertising node
// as next hop (read with birdc); a deleted Service's prefix is withdrawn.
// antctl shows each node's session Established and its routes. It logs the
// time from a Service's creation to its prefix in the router's table.
func TestBGPPolicyAdvertisesToTheLabRouter(t *testing.T) {
	e := requireReal(t)
	if _, err := exec.LookPath("birdc"); err != nil {
		t.Skip("no birdc (Debian's bird2; hack/install.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	sock := e.Opts.RouterSocket()
	table := func() (map[netip.Prefix][]string, error) { return routerTable(ctx, sock) }

	// Each node's address and Pod CIDR.
	nodeIPs := map[string]string{}
	podCIDRs := map[string]netip.Prefix{}
	var allNodeIPs []string
	for _, name := range e.Nodes {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nodeIPs[name] = a.Address
				allNodeIPs = append(allNodeIPs, a.Address)
			}
		}
		if podCIDRs[name], err = netip.ParsePrefix(n.Spec.PodCIDR); err != nil {
			t.Fatalf("node %s's pod CIDR %q: %v", name, n.Spec.PodCIDR, err)
		}
	}
	slices.Sort(allNodeIPs)

	policy := &crdv1alpha1.BGPPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e2e-lab-router-%d", time.Now().UnixNano()%1000000)},
		Spec: crdv1alpha1.BGPPolicySpec{
			NodeSelector: metav1.LabelSelector{}, // every node
			LocalASN:     lab.NodeASN,
			Advertisements: crdv1alpha1.Advertisements{Pod: &crdv1alpha1.PodAdvertisement{}, Egress: &crdv1alpha1.EgressAdvertisement{},
				Service: &crdv1alpha1.ServiceAdvertisement{IPTypes: []crdv1alpha1.ServiceIPType{
					crdv1alpha1.ServiceIPTypeClusterIP, crdv1alpha1.ServiceIPTypeLoadBalancerIP}}},
			BGPPeers: []crdv1alpha1.BGPPeer{{Address: lab.RouterIP().String(), ASN: lab.RouterASN}},
		}}
	if _, err := crd.CrdV1alpha1().BGPPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = crd.CrdV1alpha1().BGPPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})

	labtest.WaitFor(t, ctx, "the router learns each node's Pod CIDR from that node", func() error {
		routes, err := table()
		if err != nil {
			return err
		}
		for node, cidr := range podCIDRs {
			if got := routes[cidr]; !slices.Equal(got, []string{nodeIPs[node]}) {
				return fmt.Errorf("pod CIDR %s of %s: next hops %v, want [%s]", cidr, node, got, nodeIPs[node])
			}
		}
		return nil
	})

	ns := fmt.Sprintf("e2e-bgp-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "bgp-" + ns}}
	createExternalIPPool(t, ctx, crd, pool.Name, "172.30.0.235", "172.30.0.239", func() { deleteServices(e, ns) })
	port := []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}
	hasPrefix := func(p netip.Prefix, want []string) func() error {
		return func() error {
			routes, err := table()
			if err != nil {
				return err
			}
			if got := routes[p]; !slices.Equal(got, want) {
				return fmt.Errorf("%s: next hops %v, want %v", p, got, want)
			}
			return nil
		}
	}

	// A ClusterIP Service: every node advertises its IP. The time from the
	// create call to the prefix in the router's table, polled every 50 ms.
	created := time.Now()
	cip, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cip"},
		Spec: corev1.ServiceSpec{Ports: port}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cipPrefix := netip.PrefixFrom(netip.MustParseAddr(cip.Spec.ClusterIP), 32)
	if err := pollEvery(ctx, 50*time.Millisecond, func() error {
		routes, err := table()
		if err != nil {
			return err
		}
		if len(routes[cipPrefix]) == 0 {
			return fmt.Errorf("%s not in the router's table", cipPrefix)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first := time.Since(created)
	labtest.WaitFor(t, ctx, "every node advertises the ClusterIP", hasPrefix(cipPrefix, allNodeIPs))
	all := time.Since(created)
	t.Logf("BGP: time from a Service created to its prefix in the router's table: %s (from the first node), %s (from all %d nodes)",
		first.Round(time.Millisecond), all.Round(time.Millisecond), len(allNodeIPs))

	// A LoadBalancer Service (externalTrafficPolicy Cluster): its ingress
	// IP from every node.
	lb, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb",
		Annotations: map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: pool.Name}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: port}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lbPrefix netip.Prefix
	labtest.WaitFor(t, ctx, "the LoadBalancer Service has an ingress IP of the pool", func() error {
		s, err := e.Client.CoreV1().Services(ns).Get(ctx, lb.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IP == "" {
			return fmt.Errorf("status %+v", s.Status.LoadBalancer)
		}
		lbPrefix = netip.PrefixFrom(netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP), 32)
		return nil
	})
	labtest.WaitFor(t, ctx, "every node advertises the LoadBalancer IP", hasPrefix(lbPrefix, allNodeIPs))

	// Deleting the ClusterIP Service withdraws its prefix (and only it).
	deleted := time.Now()
	if err := e.Client.CoreV1().Services(ns).Delete(ctx, cip.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	labtest.WaitFor(t, ctx, "the deleted Service's prefix is withdrawn", hasPrefix(cipPrefix, nil))
	t.Logf("BGP: time from a Service deleted to its prefix gone from the router's table: %s", time.Since(deleted).Round(time.Millisecond))
	if err := hasPrefix(lbPrefix, allNodeIPs)(); err != nil {
		t.Errorf("the other Service's prefix went too: %v", err)
	}

	// An Egress (of a pool of its own): only the node holding its IP
	// advertises it.
	eg := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "bgp-" + ns}, Spec: crdv1beta1.EgressSpec{
		AppliedTo: crdv1beta1.EgressAppliedTo{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		ExternalIPPool: "bgp-egress-" + ns}}
	createExternalIPPool(t, ctx, crd, eg.Spec.ExternalIPPool, "172.30.0.233", "172.30.0.234", func() {
		_ = crd.CrdV1beta1().Egresses().Delete(context.Background(), eg.Name, metav1.DeleteOptions{})
	})
	if _, err := crd.CrdV1beta1().Egresses().Create(ctx, eg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var holder string
	var egressPrefix netip.Prefix
	labtest.WaitFor(t, ctx, "the Egress has an IP and a holder", func() error {
		got, err := crd.CrdV1beta1().Egresses().Get(ctx, eg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.EgressNode == "" || got.Status.EgressIP == "" {
			return fmt.Errorf("status %+v", got.Status)
		}
		holder, egressPrefix = got.Status.EgressNode, netip.PrefixFrom(netip.MustParseAddr(got.Status.EgressIP), 32)
		return nil
	})
	labtest.WaitFor(t, ctx, "the holder "+holder+" alone advertises the Egress IP", hasPrefix(egressPrefix, []string{nodeIPs[holder]}))

	// antctl in each node's antrea-agent container asks its agent: its
	// session with the router, and the routes it advertises. (From the
	// host, --node would dial the node's address, which only the lab's
	// namespaces reach.)
	for _, node := range e.Nodes {
		labtest.WaitFor(t, ctx, "antctl get bgppeers on "+node+" shows the session Established", func() error {
			out, stderr, err := agentAntctl(ctx, e, node, "get", "bgppeers")
			if err != nil {
				return fmt.Errorf("%v: %s", err, stderr)
			}
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) == 3 && f[0] == lab.RouterIP().String()+":179" && f[1] == fmt.Sprint(lab.RouterASN) && f[2] == "Established" {
					return nil
				}
			}
			return fmt.Errorf("no Established session with %s in:\n%s", lab.RouterIP(), out)
		})
		out, stderr, err := agentAntctl(ctx, e, node, "get", "bgproutes")
		if err != nil {
			t.Fatalf("antctl get bgproutes on %s: %v: %s", node, err, stderr)
		}
		want := map[string]string{podCIDRs[node].String(): "NodeIPAMPodCIDR", lbPrefix.String(): "ServiceLoadBalancerIP"}
		if node == holder {
			want[egressPrefix.String()] = "EgressIP"
		}
		got := map[string]string{}
		for _, line := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 2 {
				got[f[0]] = f[1]
			}
		}
		for route, typ := range want {
			if got[route] != typ {
				t.Errorf("antctl get bgproutes --node %s: route %s has type %q, want %s; output:\n%s", node, route, got[route], typ, out)
			}
		}
		if _, ok := got[egressPrefix.String()]; ok && node != holder {
			t.Errorf("antctl get bgproutes --node %s lists the Egress IP %s held by %s", node, egressPrefix, holder)
		}
	}
}

// agentAntctl runs antctl with args in the antrea-agent container on node.
func agentAntctl(ctx context.Context, e *labEnv, node string, args ...string) (stdout, stderr string, err error) {
	pods, err := e.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=antrea-agent",
		FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", "", err
	}
	if len(pods.Items) != 1 {
		return "", "", fmt.Errorf("%d antrea-agent pods on %s", len(pods.Items), node)
	}
	return e.Kubectl(ctx, append([]string{"-n", "kube-system", "exec", pods.Items[0].Name, "-c", "antrea-agent", "--", "antctl"}, args...)...)
}

// pollEvery is labtest.Poll with its own interval (for a measurement finer
// than labtest.PollInterval).
func pollEvery(ctx context.Context, every time.Duration, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(every):
		}
	}
}
