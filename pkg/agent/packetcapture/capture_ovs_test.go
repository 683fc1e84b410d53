package packetcapture

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/util/fileserver/fileservertest"
)

// ovsNode is one real node: its own OVS (userspace datapath) with br-int,
// three pods, the agent's OpenFlow client and packet-in dispatcher, and
// the PacketCapture controller on a fake API client.
type ovsNode struct {
	br      *bridgetest.Bridge
	flows   *agentof.Client
	client  *fake.Clientset
	kube    *kubefake.Clientset
	events  *record.FakeRecorder
	ctrl    *Controller
	dir     string
	a, b, c *bridgetest.Pod
}

func startNode(t *testing.T) *ovsNode {
	t.Helper()
	for _, tool := range []string{"tshark", "capinfos"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian's tshark package)", tool)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	br := bridgetest.New(t)
	c, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	store := interfacestore.NewInterfaceStore()
	n := &ovsNode{br: br, flows: c, dir: t.TempDir()}
	n.a = br.AddPod(t, "pca", "10.10.1.2/24")
	n.b = br.AddPod(t, "pcb", "10.10.1.3/24")
	n.c = br.AddPod(t, "pcc", "10.10.1.4/24")
	for _, p := range []*bridgetest.Pod{n.a, n.b, n.c} {
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+p.Name, p.Name, "default", "eth0", p.MAC, []net.IP{p.IP}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		store.AddInterface(iface)
	}
	disp := agentof.NewPacketInDispatcher(br.OF)
	n.client = fake.NewSimpleClientset()
	n.kube = kubefake.NewSimpleClientset()
	n.events = record.NewFakeRecorder(10)
	factory := crdinformers.NewSharedInformerFactory(n.client, 0)
	n.ctrl = NewController(Config{NodeName: "node-1", PodName: "antrea-agent-x", Dir: n.dir, Client: n.client,
		Kube: n.kube, Namespace: "kube-system", Recorder: n.events, Informer: factory.Crd().V1alpha1().PacketCaptures(), Flows: c, IO: disp, Interfaces: store, Datapath: purger{br}})
	factory.Start(ctx.Done())
	done := make(chan struct{}, 2)
	go func() { disp.Run(ctx); done <- struct{}{} }()
	go func() { n.ctrl.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; factory.Shutdown() })
	return n
}

// purger flushes the node's datapath flow cache, as the agent's
// dpcache.Purger does.
type purger struct{ br *bridgetest.Bridge }

func (p purger) Sync(context.Context) error {
	_, err := p.br.Appctl("revalidator/purge")
	return err
}

// udpCapture is a capture of UDP from pod pca to pod pcb's port.
func udpCapture(name string, port int32, firstN, timeout int32) *crdv1alpha1.PacketCapture {
	return &crdv1alpha1.PacketCapture{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: crdv1alpha1.PacketCaptureSpec{
			Timeout:       ptr.To(timeout),
			CaptureConfig: crdv1alpha1.CaptureConfig{FirstN: &crdv1alpha1.PacketCaptureFirstNConfig{Number: firstN}},
			Source:        crdv1alpha1.Source{Pod: &crdv1alpha1.PodReference{Namespace: "default", Name: "pca"}},
			Destination:   crdv1alpha1.Destination{Pod: &crdv1alpha1.PodReference{Namespace: "default", Name: "pcb"}},
			Packet: &crdv1alpha1.Packet{Protocol: ptr.To(intstr.FromString("UDP")),
				TransportHeader: crdv1alpha1.TransportHeader{UDP: &crdv1alpha1.UDPHeader{DstPort: ptr.To(port)}}},
		}}
}

// create creates the capture and waits until the agent says it started.
func (n *ovsNode) create(t *testing.T, pc *crdv1alpha1.PacketCapture) {
	t.Helper()
	if _, err := n.client.CrdV1alpha1().PacketCaptures().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, pc.Name, crdv1alpha1.PacketCaptureStarted, 500)
}

// waitFor polls (bounded) until the capture's condition is True and
// returns the capture.
func (n *ovsNode) waitFor(t *testing.T, name string, cond crdv1alpha1.PacketCaptureConditionType, tries int) *crdv1alpha1.PacketCapture {
	t.Helper()
	for i := 0; i < tries; i++ {
		pc, err := n.client.CrdV1alpha1().PacketCaptures().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && conditionTrue(pc, cond) {
			return pc
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("packet capture %s never reached %s", name, cond)
	return nil
}

// sender is a UDP socket in a pod, connected to addr.
type sender struct {
	conn  net.Conn
	local *net.UDPAddr
}

func dialUDP(t *testing.T, p *bridgetest.Pod, addr string) *sender {
	t.Helper()
	conn, err := p.Dial(t, "udp4", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &sender{conn: conn, local: conn.LocalAddr().(*net.UDPAddr)}
}

// send sends count datagrams "seq-<i>", i from first; every batch
// datagrams it pauses for gap (a bounded rate). It returns how many the
// kernel took: a connected UDP socket refuses the send that follows an
// ICMP port unreachable, and that datagram never leaves.
func (s *sender) send(count, first, batch int, gap time.Duration) int {
	sent := 0
	for i := 0; i < count; i++ {
		if _, err := s.conn.Write([]byte(fmt.Sprintf("seq-%d", first+i))); err == nil {
			sent++
		}
		if batch > 0 && (i+1)%batch == 0 {
			time.Sleep(gap)
		}
	}
	return sent
}

// resolveNeighbour pings b from a once and returns after the reply, so a's
// neighbour entry for b is resolved before a capture starts. A datagram
// sent before that waits in the kernel's ARP queue and may leave after
// the capture started, as the first packet in its file.
func resolveNeighbour(t *testing.T, a, b *bridgetest.Pod) {
	t.Helper()
	bridgetest.Run(t, "ip", "netns", "exec", a.NS, "ping", "-c", "1", "-W", "2", b.IP.String())
}

// listenUDP makes pod p receive on port and returns a counter of the
// datagrams received.
func listenUDP(t *testing.T, p *bridgetest.Pod, port int) func() int {
	t.Helper()
	var pc net.PacketConn
	if err := p.Do(t, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	count := 0
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				got <- count
				return
			}
			count++
		}
	}()
	closed := false
	t.Cleanup(func() {
		if !closed {
			pc.Close()
			<-got
		}
	})
	return func() int {
		_ = pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		closed = true
		return <-got
	}
}

// tsharkFields lists fields of every packet of a pcapng file with tshark.
func tsharkFields(t *testing.T, file string, fields ...string) []string {
	t.Helper()
	args := []string{"-r", file, "-T", "fields"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark %v: %v: %s", args, err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, "Running as user") {
			lines = append(lines, l)
		}
	}
	return lines
}

// capinfosCount is the packet count capinfos reads in a file.
func capinfosCount(t *testing.T, file string) int {
	t.Helper()
	out, err := exec.Command("capinfos", "-c", "-M", file).CombinedOutput()
	if err != nil {
		t.Fatalf("capinfos %s: %v: %s", file, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Number of packets" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("capinfos %s: %q", file, l)
			}
			return n
		}
	}
	t.Fatalf("capinfos %s says no packet count:\n%s", file, out)
	return 0
}

// localFile is the file status.filePath names on this agent.
func (n *ovsNode) localFile(t *testing.T, pc *crdv1alpha1.PacketCapture) string {
	t.Helper()
	pod, path, ok := strings.Cut(pc.Status.FilePath, ":")
	if !ok || pod != "antrea-agent-x" || filepath.Dir(path) != n.dir {
		t.Fatalf("status.filePath %q is not <agent pod>:<file in %s>", pc.Status.FilePath, n.dir)
	}
	return path
}

func TestACaptureHoldsExactlyThePacketsThePodSentToThePortAndNoOtherTraffic(t *testing.T) {
	n := startNode(t)
	received := listenUDP(t, n.b, 5000)
	dst := n.b.IP.String() + ":5000"
	matching := dialUDP(t, n.a, dst)
	fromOtherPod := dialUDP(t, n.c, dst)
	toOtherPort := dialUDP(t, n.a, n.b.IP.String()+":5001")
	// The first datagrams resolve ARP: send some unrelated traffic before.
	fromOtherPod.send(3, 0, 0, 0)
	toOtherPort.send(3, 0, 0, 0)

	// firstN above what is sent: the timeout ends it, with what matched.
	n.create(t, udpCapture("exact", 5000, 100, 2))
	// What the switch holds: one flow in the root classifier (table 0,
	// which dump-flows does not name), at pca's
	// port, sending a copy through the meter and on to the IP pipeline.
	flows := n.br.DumpFlows(t, "cookie=0x7e000000/0xff000000")
	if len(flows) != 1 || !strings.Contains(flows[0], fmt.Sprintf("udp,in_port=%d,nw_src=%s,nw_dst=%s,tp_dst=5000 ", n.a.OFPort, n.a.IP, n.b.IP)) ||
		!strings.Contains(flows[0], "actions=controller(userdata=04.01,meter_id=4),goto_table:") || strings.Contains(flows[0], "table=") {
		t.Errorf("the capture's flows in the switch:\n%s\nwant one root classifier flow matching pca's datagrams to pcb:5000", strings.Join(flows, "\n"))
	}
	t.Logf("the capture's flow: %s", strings.Join(flows, "\n"))
	for i := 0; i < 10; i++ {
		fromOtherPod.send(1, 100+i, 0, 0)
		if matching.send(1, i, 0, 0) != 1 {
			t.Fatalf("pca could not send datagram %d to %s", i, dst)
		}
		toOtherPort.send(1, 100+i, 0, 0)
	}
	pc := n.waitFor(t, "exact", crdv1alpha1.PacketCaptureComplete, 1000)
	file := n.localFile(t, pc)
	if got := capinfosCount(t, file); got != 10 {
		t.Errorf("capinfos counts %d packets in the file, want the 10 datagrams sent to port 5000 by pca", got)
	}
	want := fmt.Sprintf("%s\t%s\t%d\t5000", n.a.IP, n.b.IP, matching.local.Port)
	rows := tsharkFields(t, file, "ip.src", "ip.dst", "udp.srcport", "udp.dstport")
	if len(rows) != 10 {
		t.Errorf("tshark lists %d packets, want 10:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	for _, r := range rows {
		if r != want {
			t.Errorf("tshark lists %q, want only %q (pca's datagrams to pcb:5000)", r, want)
		}
	}
	if pc.Status.NumberCaptured != 10 {
		t.Errorf("status.numberCaptured = %d, want 10", pc.Status.NumberCaptured)
	}
	if got := received(); got < 13 {
		t.Errorf("pcb received %d datagrams on port 5000, want the 13 sent (the capture must not take them)", got)
	}
	if flows := n.br.DumpFlows(t, "cookie=0x7e000000/0xff000000"); len(flows) != 0 {
		t.Errorf("the capture's flows are still installed after it completed:\n%s", strings.Join(flows, "\n"))
	}
}

func TestACaptureStopsAtFirstN(t *testing.T) {
	n := startNode(t)
	listenUDP(t, n.b, 5002)
	dst := n.b.IP.String() + ":5002"
	s := dialUDP(t, n.a, dst)
	resolveNeighbour(t, n.a, n.b)
	n.create(t, udpCapture("first5", 5002, 5, 60))
	if sent := s.send(10, 0, 0, 0); sent != 10 {
		t.Fatalf("pca sent %d of 10 datagrams", sent)
	}
	pc := n.waitFor(t, "first5", crdv1alpha1.PacketCaptureComplete, 1000)
	var reason string
	for _, c := range pc.Status.Conditions {
		if c.Type == crdv1alpha1.PacketCaptureComplete {
			reason = c.Reason
		}
	}
	if reason != "Succeed" {
		t.Errorf("the capture completed with reason %q, want Succeed (firstN reached, well before the 60 s timeout)", reason)
	}
	file := n.localFile(t, pc)
	if got := capinfosCount(t, file); got != 5 {
		t.Errorf("capinfos counts %d packets, want firstN = 5 of the 10 sent", got)
	}
	// The first five sent, in order: their payloads are "seq-0" .. "seq-4".
	rows := tsharkFields(t, file, "udp.srcport", "udp.dstport", "data.data")
	for i, r := range rows {
		want := fmt.Sprintf("%d\t5002\t%x", s.local.Port, fmt.Sprintf("seq-%d", i))
		if r != want {
			t.Errorf("packet %d: tshark lists %q, want %q", i, r, want)
		}
	}
	if pc.Status.NumberCaptured != 5 {
		t.Errorf("status.numberCaptured = %d, want 5", pc.Status.NumberCaptured)
	}
}

// TestACaptureIsUploadedToTheFileServer uploads to an SFTP server in the
// test's process (fileservertest; the lab's e2e test uploads to OpenSSH).
func TestACaptureIsUploadedToTheFileServer(t *testing.T) {
	n := startNode(t)
	server := fileservertest.Start(t)
	secret := func(password string) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: AuthSecretName, Namespace: "kube-system"},
			Data: map[string][]byte{"username": []byte(fileservertest.User), "password": []byte(password)}}
		_ = n.kube.CoreV1().Secrets("kube-system").Delete(context.Background(), sec.Name, metav1.DeleteOptions{})
		if _, err := n.kube.CoreV1().Secrets("kube-system").Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	listenUDP(t, n.b, 5003)
	s := dialUDP(t, n.a, n.b.IP.String()+":5003")
	resolveNeighbour(t, n.a, n.b)
	uploaded := func(name string) *crdv1alpha1.PacketCapture {
		t.Helper()
		pc := udpCapture(name, 5003, 3, 60)
		pc.Spec.FileServer = &crdv1alpha1.PacketCaptureFileServer{URL: server.URL(), HostPublicKey: server.HostKey.Marshal()}
		n.create(t, pc)
		if sent := s.send(3, 0, 0, 0); sent != 3 {
			t.Fatalf("pca sent %d of 3 datagrams", sent)
		}
		return n.waitFor(t, name, crdv1alpha1.PacketCaptureComplete, 1000)
	}
	uploadCondition := func(pc *crdv1alpha1.PacketCapture) metav1.Condition {
		for _, c := range pc.Status.Conditions {
			if c.Type == crdv1alpha1.PacketCaptureFileUploaded {
				return metav1.Condition{Status: c.Status, Reason: c.Reason, Message: c.Message}
			}
		}
		t.Fatalf("%s has no %s condition: %+v", pc.Name, crdv1alpha1.PacketCaptureFileUploaded, pc.Status.Conditions)
		return metav1.Condition{}
	}

	secret("wrong-" + fileservertest.Password)
	pc := uploaded("refused")
	if c := uploadCondition(pc); c.Status != metav1.ConditionFalse || c.Reason != "AuthenticationFailed" {
		t.Errorf("with a wrong password the upload condition is %+v, want False AuthenticationFailed", c)
	} else if strings.Contains(c.Message, fileservertest.Password) {
		t.Errorf("the condition shows the password: %q", c.Message)
	}
	select {
	case e := <-n.events.Events:
		if !strings.Contains(e, "Warning FileUploadFailed") || !strings.Contains(e, "authentication failed") || strings.Contains(e, fileservertest.Password) {
			t.Errorf("the Event of the refused upload is %q, want a Warning FileUploadFailed saying authentication failed, without the password", e)
		}
	default:
		t.Error("no Event was posted for the refused upload")
	}
	if files := server.Files(t); len(files) != 0 {
		t.Errorf("the refused upload left %v on the server", files)
	}
	// The file stays on the agent.
	if got := capinfosCount(t, n.localFile(t, pc)); got != 3 {
		t.Errorf("the agent kept %d packets of the refused upload, want 3", got)
	}

	secret(fileservertest.Password)
	pc = uploaded("sent")
	if c := uploadCondition(pc); c.Status != metav1.ConditionTrue {
		t.Errorf("the upload condition is %+v, want True", c)
	}
	if want := server.URL() + "/sent.pcapng"; pc.Status.FilePath != want {
		t.Errorf("status.filePath = %q, want %q", pc.Status.FilePath, want)
	}
	if files := server.Files(t); len(files) != 1 || files[0] != "sent.pcapng" {
		t.Fatalf("the server holds %v, want sent.pcapng", files)
	}
	if got := capinfosCount(t, filepath.Join(server.Dir, "sent.pcapng")); got != 3 {
		t.Errorf("capinfos counts %d packets in the uploaded file, want 3", got)
	}
}

func TestACaptureOfBothDirectionsHoldsThePingsAndTheirReplies(t *testing.T) {
	n := startNode(t)
	pc := udpCapture("both", 0, 6, 60)
	pc.Spec.Direction = crdv1alpha1.CaptureDirectionBoth
	pc.Spec.Packet = &crdv1alpha1.Packet{Protocol: ptr.To(intstr.FromString("ICMP"))}
	// ARP first, so that the three pings each get a reply.
	resolveNeighbour(t, n.a, n.b)
	n.create(t, pc)
	bridgetest.Run(t, "ip", "netns", "exec", n.a.NS, "ping", "-c", "3", "-i", "0.2", "-W", "2", n.b.IP.String())
	got := n.waitFor(t, "both", crdv1alpha1.PacketCaptureComplete, 1000)
	file := n.localFile(t, got)
	// ping's three echo requests (type 8) from pca, each followed by pcb's
	// echo reply (type 0).
	req := fmt.Sprintf("%s\t%s\t8", n.a.IP, n.b.IP)
	rep := fmt.Sprintf("%s\t%s\t0", n.b.IP, n.a.IP)
	want := []string{req, rep, req, rep, req, rep}
	rows := tsharkFields(t, file, "ip.src", "ip.dst", "icmp.type")
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("tshark lists\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
