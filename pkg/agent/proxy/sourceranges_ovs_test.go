package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// TestLoadBalancerSourceRangesOnRealOVS: a LoadBalancer whose
// loadBalancerSourceRanges name the outside host lets it connect through
// the ingress IP (its SYN reaches the endpoint with its own address) and
// drops a pod's SYN there (the pod still reaches the ClusterIP); the
// ranges swapped, the pod gets in and the outside host is dropped, while
// the outside host's connection opened before keeps working; upstream's
// e2e steps follow: 0.0.0.0/1 and 128.0.0.0/1 let both in, 255.0.0.0/32
// neither, no range both again; and under externalTrafficPolicy Local,
// traffic from outside is judged the same.
func TestLoadBalancerSourceRangesOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("who", corev1.ProtocolTCP, 8080), epPort("echo", corev1.ProtocolTCP, 9090))
	lb := withSpec(service("lb", "10.96.0.12", svcPort("who", corev1.ProtocolTCP, 80, 8080), svcPort("echo", corev1.ProtocolTCP, 90, 9090)),
		func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerSourceRanges = []string{"192.168.77.2/32"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.100.11"}}
		})
	n := newOVSNode(t, Config{}, lb, slice("lb-1", "lb", ports, ep{ip: "10.10.1.3", node: "node-1"}))
	cli, e1 := n.addPod(t, "c1", "10.10.1.2/24"), n.addPod(t, "e1", "10.10.1.3/24")
	e1.ServeWho(t, 8080)
	e1.ServeEcho(t, 9090)
	out := n.AddOutsideHost(t, "out", bridgetest.HostLink{Node: "192.168.77.1/24", Host: "192.168.77.2/24"})
	n.RouteToBridge(t, "192.168.100.0/24", agentof.GlobalVirtualMAC)
	table := fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.LoadBalancerSourceRangesTable).ID)
	n.waitFlows(t, table, "the outside host's range should be installed", func(f []string) bool {
		return strings.Contains(strings.Join(f, "\n"), "nw_src=192.168.77.2,")
	})

	who, client := bridgetest.Answerer(out.AskWhoEventually(t, "tcp4", "192.168.100.11:80"))
	if who != "e1" || !strings.HasPrefix(client, "192.168.77.2:") {
		t.Fatalf("the outside host in the range should reach e1 with its own address; %s answered, seeing %s", who, client)
	}
	if got := connectOutcome(t, cli, "192.168.100.11:80"); got != "timeout" {
		t.Fatalf("a pod outside the range should be dropped at the ingress IP, connect: %s", got)
	}
	if drops := n.dropCount(t, table); drops == 0 {
		t.Fatalf("the pod's SYNs should meet the source ranges' drop; the table holds:\n%s", strings.Join(n.DumpFlowsWithStats(t, table), "\n"))
	}
	if got := connectOutcome(t, cli, "10.96.0.12:80"); got != "e1" {
		t.Fatalf("the ClusterIP should stay open to the pod, connect: %s", got)
	}
	t.Logf("LoadBalancerSourceRanges:\n%s", strings.Join(n.DumpFlows(t, table), "\n"))

	// A connection the outside host opened before the ranges change.
	conn, err := out.Dial(t, "tcp4", "192.168.100.11:90", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo(t, conn, "before")

	steps := []struct {
		ranges   []string
		cli, out string
	}{
		{[]string{"10.10.1.2/32"}, "e1", "timeout"},
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, "e1", "e1"},
		{[]string{"255.0.0.0/32"}, "timeout", "timeout"},
		{nil, "e1", "e1"},
	}
	for i, s := range steps {
		updateService(t, n.client, "lb", func(svc *corev1.Service) { svc.Spec.LoadBalancerSourceRanges = s.ranges })
		eventuallyOutcome(t, cli, "192.168.100.11:80", s.cli, fmt.Sprintf("ranges %v: the pod", s.ranges))
		eventuallyOutcome(t, out, "192.168.100.11:80", s.out, fmt.Sprintf("ranges %v: the outside host", s.ranges))
		if i == 0 {
			echo(t, conn, "after the outside host left the ranges")
		}
	}

	// externalTrafficPolicy Local: traffic from outside has its own
	// ServiceLB flow; the ranges come first all the same.
	updateService(t, n.client, "lb", func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		svc.Spec.LoadBalancerSourceRanges = []string{"10.10.1.0/24"}
	})
	eventuallyOutcome(t, out, "192.168.100.11:80", "timeout", "externalTrafficPolicy Local: the outside host out of the range")
	eventuallyOutcome(t, cli, "192.168.100.11:80", "e1", "externalTrafficPolicy Local: the pod in the range")
}

// TestAnAgentRestartKeepsTheSourceRangesOnRealOVS: the ranges' flows carry
// no round, so when a new run deletes the previous run's round (which the
// agent does once the NetworkPolicies are realized, maybe before its proxy
// synced) the ports stay guarded; once every Service is synced, the ranges
// of a Service deleted while the agent was down go, and the others stay.
func TestAnAgentRestartKeepsTheSourceRangesOnRealOVS(t *testing.T) {
	lb := func(name, ip string) *corev1.Service {
		return withSpec(service(name, "10.96.0."+ip[len(ip)-2:], svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerSourceRanges = []string{"192.168.77.2/32"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		})
	}
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	n := newOVSNode(t, Config{}, lb("kept", "192.168.100.11"), slice("kept-1", "kept", ports, ep{ip: "10.10.1.3", node: "node-1"}),
		lb("gone", "192.168.100.13"), slice("gone-1", "gone", ports, ep{ip: "10.10.1.3", node: "node-1"}))
	table := fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.LoadBalancerSourceRangesTable).ID)
	count := func(f []string, ip string) int { return strings.Count(strings.Join(f, "\n"), "nw_dst="+ip+",") }
	n.waitFlows(t, table, "both Services' ranges should be installed", func(f []string) bool {
		return count(f, "192.168.100.11") == 2 && count(f, "192.168.100.13") == 2
	})

	n.stop()
	<-n.done
	ctx := context.Background()
	if err := n.client.CoreV1().Services("default").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	flows, err := agentof.NewClient(n.OF, 2)
	if err != nil {
		t.Fatal(err)
	}
	n.SetReplay(func(ctx context.Context, conn *openflow.Conn) error { return flows.Replay(ctx, conn) })
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: n.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	if err := flows.DeleteRound(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if f := n.DumpFlows(t, table); count(f, "192.168.100.11") != 2 {
		t.Fatalf("the previous run's ranges should outlive its round; the table holds:\n%s", strings.Join(f, "\n"))
	}
	n.flows = flows
	n.start(t, Config{Packets: packetIns(t, n.OF)})
	n.waitFlows(t, table, "the deleted Service's ranges should go and the other's stay", func(f []string) bool {
		return count(f, "192.168.100.11") == 2 && count(f, "192.168.100.13") == 0
	})
}

// echo writes msg on an echoed connection and reads it back.
func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		t.Fatalf("%s: write on the open connection: %v", msg, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != msg {
		t.Fatalf("%s: the open connection should keep working; read %q, %v", msg, line, err)
	}
}

// eventuallyOutcome waits until a connection from the pod to addr ends as
// want ("timeout", "refused" or the answerer).
func eventuallyOutcome(t *testing.T, from *bridgetest.Pod, addr, want, what string) {
	t.Helper()
	var got string
	for i := 0; i < 10; i++ {
		if got = connectOutcome(t, from, addr); got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: connect to %s should end as %s, ends as %s", what, addr, want, got)
}

// waitFlows waits until the flows of a table satisfy cond.
func (n *ovsNode) waitFlows(t *testing.T, table, what string, cond func([]string) bool) {
	t.Helper()
	var flows []string
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		flows = n.DumpFlows(t, table)
		return cond(flows), nil
	}); err != nil {
		t.Fatalf("%s; the table holds:\n%s", what, strings.Join(flows, "\n"))
	}
}

// dropCount is the packets the table's drop flows matched.
func (n *ovsNode) dropCount(t *testing.T, table string) int {
	t.Helper()
	total := 0
	for _, f := range n.DumpFlowsWithStats(t, table) {
		if strings.HasSuffix(f, "actions=drop") && !strings.Contains(f, "priority=0") {
			total += int(field(f, "n_packets="))
		}
	}
	return total
}
