// Command services-bench measures Services on a running lab, as a client pod
// sees them, so that AntreaProxy and kube-proxy (antrea-lab up --proxy
// antrea|kube-proxy) are measured the same way in one run of
// hack/bench/services.sh, which prints the two side by side.
//
// Everything a client observes is measured from inside a real pod's network
// namespace (the Go dialer enters it): connection setup through a ClusterIP
// and straight to the pod, connections per second and throughput, and how
// long after an EndpointSlice is written the first connection reaches its
// endpoint. Services are selector-less and their EndpointSlices written by
// this program, so the time starts when the API server accepted the slice.
// The proxy's cost is read from the node: the RSS of the processes that
// realize Services and what they hold (OVS flows and groups, nftables rules).
//
// Every loop is bounded in count and time; the namespace it makes is deleted
// at the end (also on failure), and traffic goes only to pods of the lab.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

const namespace = "svc-bench"

// Result is what one run prints (JSON), for services.sh to put side by side.
type Result struct {
	Proxy string `json:"proxy"`
	// ProgramMs: EndpointSlice created -> first connection reaching it.
	ProgramP50Ms, ProgramP99Ms float64
	// ConnectUs: TCP connection setup (SYN to established) through a ClusterIP
	// and straight to the pod, at 1 Service and at Scale Services.
	Connect1P50Us, Connect1P99Us, ConnectScaleP50Us, ConnectScaleP99Us, ConnectPodP50Us float64
	// CPS: connections per second (connect + close, 4 clients).
	CPSClusterIP, CPSPod float64
	// Mbps: one TCP stream for 3 s.
	MbpsClusterIP, MbpsPod float64
	Scale                  int
	// CreateS: creating Scale Services and their slices through the API;
	// ProgramAllS: from the first create until the last Service answers.
	CreateS, ProgramAllS float64
	// PlusOneMs: one more Service at Scale, slice created -> first connection (p50 of 5).
	PlusOneMs float64
	// What the node holds and pays, before and at Scale.
	RSSMiB0, RSSMiBScale                     float64
	Flows0, FlowsScale, Groups0, GroupsScale int
	NftRules0, NftRulesScale                 int
}

func main() {
	proxy := flag.String("proxy", "antrea", "the lab's proxy (label of the result)")
	scale := flag.Int("services", 10000, "Services (2 endpoints each) for the scale figures")
	samples := flag.Int("samples", 20, "EndpointSlice->first connection samples")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	r, err := run(ctx, *proxy, *scale, *samples)
	if err != nil {
		fmt.Fprintln(os.Stderr, "services-bench:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

type bench struct {
	client        kubernetes.Interface
	opts          lab.Options
	clientNS      ns.NetNS
	servers       []*corev1.Pod
	node          string
	proxyRSSComms []string
}

func run(ctx context.Context, proxy string, scale, samples int) (*Result, error) {
	opts := labtest.Options()
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := &bench{client: client, opts: opts}
	defer b.cleanup()
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	defer b.clientNS.Close()
	r := &Result{Proxy: proxy, Scale: scale}
	b.proxyRSSComms = []string{"antrea-agent"}
	if proxy == string(lab.ProxyKube) {
		b.proxyRSSComms = append(b.proxyRSSComms, "kube-proxy")
	}
	r.RSSMiB0, r.Flows0, r.Groups0, r.NftRules0 = b.nodeCost(ctx)

	// Programming latency, one Service at a time.
	var lat []float64
	for i := range samples {
		d, err := b.newServiceLatency(ctx, fmt.Sprintf("lat-%d", i))
		if err != nil {
			return nil, err
		}
		lat = append(lat, ms(d))
	}
	r.ProgramP50Ms, r.ProgramP99Ms = pct(lat, 50), pct(lat, 99)

	// Data path at 1 Service (lat-0), then straight to the pod.
	first, err := b.client.CoreV1().Services(namespace).Get(ctx, "lat-0", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	vip := net.JoinHostPort(first.Spec.ClusterIP, "80")
	podAddr := net.JoinHostPort(b.servers[0].Status.PodIP, "8080")
	c1, err := b.connectTimes(vip, 300)
	if err != nil {
		return nil, err
	}
	r.Connect1P50Us, r.Connect1P99Us = pct(c1, 50), pct(c1, 99)
	cp, err := b.connectTimes(podAddr, 300)
	if err != nil {
		return nil, err
	}
	r.ConnectPodP50Us = pct(cp, 50)
	r.CPSClusterIP, r.CPSPod = b.cps(vip, 3*time.Second), b.cps(podAddr, 3*time.Second)
	sinkVIP, err := b.sinkService(ctx)
	if err != nil {
		return nil, err
	}
	r.MbpsClusterIP = b.throughput(sinkVIP, 3*time.Second)
	r.MbpsPod = b.throughput(net.JoinHostPort(b.servers[1].Status.PodIP, "5001"), 3*time.Second)

	// Scale: Services with 2 endpoints each; the last one created answering
	// means the proxy caught up with all of them.
	start := time.Now()
	last, err := b.createMany(ctx, scale)
	if err != nil {
		return nil, err
	}
	r.CreateS = time.Since(start).Seconds()
	if _, err := b.firstConnect(net.JoinHostPort(last, "80"), 15*time.Minute); err != nil {
		return nil, fmt.Errorf("the last of %d Services never answered: %w", scale, err)
	}
	r.ProgramAllS = time.Since(start).Seconds()
	var plus []float64
	for i := range 5 {
		d, err := b.newServiceLatency(ctx, fmt.Sprintf("plus-%d", i))
		if err != nil {
			return nil, err
		}
		plus = append(plus, ms(d))
	}
	r.PlusOneMs = pct(plus, 50)
	cs, err := b.connectTimes(vip, 300)
	if err != nil {
		return nil, err
	}
	r.ConnectScaleP50Us, r.ConnectScaleP99Us = pct(cs, 50), pct(cs, 99)
	r.RSSMiBScale, r.FlowsScale, r.GroupsScale, r.NftRulesScale = b.nodeCost(ctx)
	return r, nil
}

// setup makes the namespace, two agnhost servers (one per node: HTTP 8080
// and a TCP sink on 5001) and a client on the first node.
func (b *bench) setup(ctx context.Context) error {
	b.cleanup()
	if err := labtest.CreateNamespace(ctx, b.client, namespace, nil); err != nil {
		return err
	}
	nodes, err := b.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) < 2 {
		return fmt.Errorf("need a lab with 2 nodes: %v", err)
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	b.node = nodes.Items[0].Name
	pod := func(name, node string, args ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": name}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
				Name: "c", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: args}}}}
	}
	serve := []string{"sh", "-c", "nc -lk -p 5001 >/dev/null & exec /agnhost netexec --http-port=8080"}
	pods := []*corev1.Pod{
		pod("server-1", nodes.Items[0].Name, serve...),
		pod("server-2", nodes.Items[1].Name, serve...),
		pod("client", nodes.Items[0].Name, "/agnhost", "pause"),
	}
	var names []string
	for _, p := range pods {
		if _, err := b.client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		names = append(names, p.Name)
	}
	got, err := labtest.WaitPodsUsable(ctx, b.client, namespace, names)
	if err != nil {
		return err
	}
	b.servers = []*corev1.Pod{got["server-1"], got["server-2"]}
	path, err := lab.NetNSPathOfPod(got["client"])
	if err != nil {
		return err
	}
	b.clientNS, err = ns.GetNS(path)
	return err
}

func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := b.client.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	_ = labtest.WaitGone(ctx, "namespace "+namespace, func() error {
		_, err := b.client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		return err
	})
}

// service creates a selector-less Service (port 80 -> 8080) and returns it.
func (b *bench) service(ctx context.Context, name string, port int32) (*corev1.Service, error) {
	return b.client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP,
			Port: 80, TargetPort: intstr.FromInt32(port)}}},
	}, metav1.CreateOptions{})
}

// slice writes the Service's EndpointSlice with the given servers.
func (b *bench) slice(ctx context.Context, svc string, port int32, servers ...*corev1.Pod) error {
	ready := true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc + "-bench", Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "services-bench"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("p"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(port)}},
	}
	for _, p := range servers {
		node := p.Spec.NodeName
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &node})
	}
	_, err := b.client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, s, metav1.CreateOptions{})
	return err
}

func ptr[T any](v T) *T { return &v }

// newServiceLatency creates a Service, lets the proxy program it without
// endpoints, then writes its EndpointSlice and times the first connection
// that reaches the endpoint.
func (b *bench) newServiceLatency(ctx context.Context, name string) (time.Duration, error) {
	svc, err := b.service(ctx, name, 8080)
	if err != nil {
		return 0, err
	}
	time.Sleep(time.Second)
	start := time.Now()
	if err := b.slice(ctx, name, 8080, b.servers[1]); err != nil {
		return 0, err
	}
	at, err := b.firstConnect(net.JoinHostPort(svc.Spec.ClusterIP, "80"), time.Minute)
	if err != nil {
		return 0, fmt.Errorf("service %s: %w", name, err)
	}
	return at.Sub(start), nil
}

// firstConnect dials addr from the client pod every 2 ms (20 ms timeout)
// until a connection is established, and returns when that was.
func (b *bench) firstConnect(addr string, limit time.Duration) (time.Time, error) {
	var at time.Time
	err := b.clientNS.Do(func(ns.NetNS) error {
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) {
			c, err := net.DialTimeout("tcp", addr, 20*time.Millisecond)
			if err == nil {
				at = time.Now()
				c.Close()
				return nil
			}
			time.Sleep(2 * time.Millisecond)
		}
		return fmt.Errorf("no connection to %s within %s", addr, limit)
	})
	return at, err
}

// connectTimes times n sequential TCP connection setups to addr (µs).
func (b *bench) connectTimes(addr string, n int) ([]float64, error) {
	var out []float64
	err := b.clientNS.Do(func(ns.NetNS) error {
		for range n {
			t := time.Now()
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return err
			}
			out = append(out, float64(time.Since(t).Microseconds()))
			// Reset rather than FIN: no TIME_WAIT pile-up in the client.
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
		return nil
	})
	return out, err
}

// cps counts connections set up and closed in d by 4 clients.
func (b *bench) cps(addr string, d time.Duration) float64 {
	return labtest.ConnectionsPerSecond(b.clientNS, addr, d)
}

// sinkService is a Service to server-2's TCP sink (80 -> 5001).
func (b *bench) sinkService(ctx context.Context) (string, error) {
	svc, err := b.service(ctx, "sink", 5001)
	if err != nil {
		return "", err
	}
	if err := b.slice(ctx, "sink", 5001, b.servers[1]); err != nil {
		return "", err
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	_, err = b.firstConnect(addr, time.Minute)
	return addr, err
}

// throughput sends one TCP stream to addr for d and returns Mbit/s.
func (b *bench) throughput(addr string, d time.Duration) float64 {
	return labtest.StreamMbits(b.clientNS, addr, d)
}

// createMany creates n Services with a 2-endpoint slice each, 32 at a time,
// and returns the ClusterIP of the last one created.
func (b *bench) createMany(ctx context.Context, n int) (string, error) {
	var (
		mu   sync.Mutex
		ferr error
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n-1 {
					return
				}
				err := b.createOne(ctx, fmt.Sprintf("scale-%d", i))
				if err != nil {
					mu.Lock()
					ferr = errors.Join(ferr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if ferr != nil {
		return "", ferr
	}
	name := fmt.Sprintf("scale-%d", n-1)
	if err := b.createOne(ctx, name); err != nil {
		return "", err
	}
	svc, err := b.client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return svc.Spec.ClusterIP, nil
}

func (b *bench) createOne(ctx context.Context, name string) error {
	for attempt := 0; ; attempt++ {
		_, err := b.service(ctx, name, 8080)
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
		if attempt == 5 {
			return err
		}
		time.Sleep(time.Second)
	}
	for attempt := 0; ; attempt++ {
		err := b.slice(ctx, name, 8080, b.servers...)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if attempt == 5 {
			return err
		}
		time.Sleep(time.Second)
	}
}

// nodeCost reads, on the client's node, the RSS of the processes that
// realize Services and what they hold in OVS and nftables.
func (b *bench) nodeCost(ctx context.Context) (rssMiB float64, flows, groups, nftRules int) {
	for _, comm := range b.proxyRSSComms {
		procs, _ := lab.NodeProcesses(b.opts, b.node, comm)
		for _, p := range procs {
			rssMiB += float64(p.RSSBytes()) / (1 << 20)
		}
	}
	nodeNS := lab.NetNSPrefix + b.node
	sock := "unix:" + filepath.Join(b.opts.NodeOVSDir(b.node), "br-int.mgmt")
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nodeNS, "ovs-ofctl", "-O", "OpenFlow15", "dump-aggregate", sock).Output(); err == nil {
		if i := strings.Index(string(out), "flow_count="); i >= 0 {
			flows, _ = strconv.Atoi(strings.Fields(string(out)[i+len("flow_count="):])[0])
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nodeNS, "ovs-ofctl", "-O", "OpenFlow15", "dump-groups", sock).Output(); err == nil {
		groups = strings.Count(string(out), "group_id=")
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nodeNS, "nft", "-j", "list", "ruleset").Output(); err == nil {
		// Rules, and elements of sets and maps: what netfilter holds.
		var rs struct {
			Nftables []map[string]json.RawMessage `json:"nftables"`
		}
		if json.Unmarshal(out, &rs) == nil {
			for _, o := range rs.Nftables {
				if _, ok := o["rule"]; ok {
					nftRules++
				}
				for _, k := range []string{"set", "map"} {
					var set struct {
						Elem []json.RawMessage `json:"elem"`
					}
					if raw, ok := o[k]; ok && json.Unmarshal(raw, &set) == nil {
						nftRules += len(set.Elem)
					}
				}
			}
		}
	}
	return rssMiB, flows, groups, nftRules
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the p-th percentile (nearest rank) of v.
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}
