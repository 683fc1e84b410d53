package packetcapture

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// tcpdump runs tcpdump in a netns on an interface, writing what filter
// selects to a file; stop ends it and returns the file and what tcpdump
// said of drops.
type tcpdump struct {
	cmd    *exec.Cmd
	file   string
	stderr *strings.Builder
	done   chan struct{}
}

func startTcpdump(t *testing.T, netns, ifName, file string, filter ...string) *tcpdump {
	t.Helper()
	args := append([]string{"netns", "exec", netns, "tcpdump", "--immediate-mode", "-i", ifName, "-n", "-U", "-B", "8192", "-w", file}, filter...)
	cmd := exec.Command("ip", args...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &tcpdump{cmd: cmd, file: file, stderr: &strings.Builder{}, done: make(chan struct{})}
	listening := make(chan struct{})
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(errPipe)
		said := false
		for sc.Scan() {
			d.stderr.WriteString(sc.Text() + "\n")
			if !said && strings.Contains(sc.Text(), "listening on") {
				said = true
				close(listening)
			}
		}
		if !said {
			close(listening)
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-d.done
			_ = cmd.Wait()
		}
	})
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatalf("tcpdump on %s never said it was listening", ifName)
	}
	return d
}

func (d *tcpdump) stop(t *testing.T) string {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	<-d.done
	_ = d.cmd.Wait()
	return strings.TrimSpace(d.stderr.String())
}

// TestCaptureOf10000PacketsAgainstTcpdump is a measurement: a pod sends
// 10,000 UDP datagrams at a bounded rate while three observers take them:
// the PacketCapture (metered packet-in), tcpdump on the pod's veth, and
// tcpdump (AF_PACKET) on an internal port an OVS mirror of the pod's port
// outputs to. It logs each one's count and the time until the capture
// completed; it checks that the capture holds only matching packets, no
// more than were sent. Run it with PACKETCAPTURE_MEASURE=1
// (PACKETCAPTURE_MEASURE_GAP: the pause after every 10 datagrams, default 2ms).
func TestCaptureOf10000PacketsAgainstTcpdump(t *testing.T) {
	if os.Getenv("PACKETCAPTURE_MEASURE") == "" {
		t.Skip("a measurement: set PACKETCAPTURE_MEASURE=1")
	}
	gap := 2 * time.Millisecond
	if g := os.Getenv("PACKETCAPTURE_MEASURE_GAP"); g != "" {
		var err error
		if gap, err = time.ParseDuration(g); err != nil {
			t.Fatal(err)
		}
	}
	const total = 10000
	n := startNode(t)
	received := listenUDP(t, n.b, 5003)
	s := dialUDP(t, n.a, n.b.IP.String()+":5003")
	resolveNeighbour(t, n.a, n.b)

	// The mirror: the pod port's packets copied to an internal port.
	if _, err := n.br.Vsctl("add-port", "br-int", "pcapmir", "--", "set", "interface", "pcapmir", "type=internal",
		"--", "--id=@p", "get", "port", n.a.HostIF, "--", "--id=@o", "get", "port", "pcapmir",
		"--", "--id=@m", "create", "mirror", "name=pcap", "select-src-port=@p", "output-port=@o",
		"--", "set", "bridge", "br-int", "mirrors=@m"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", n.br.NetNS(), "link", "set", "pcapmir", "up").CombinedOutput(); err != nil {
		t.Fatalf("pcapmir up: %v: %s", err, out)
	}
	dir := t.TempDir()
	filter := []string{"udp", "and", "dst", "port", "5003"}
	veth := startTcpdump(t, n.br.NetNS(), n.a.HostIF, filepath.Join(dir, "veth.pcap"), filter...)
	mirror := startTcpdump(t, n.br.NetNS(), "pcapmir", filepath.Join(dir, "mirror.pcap"), filter...)

	n.create(t, udpCapture("measure", 5003, total, 20))
	start := time.Now()
	sent := s.send(total, 0, 10, gap)
	sendTime := time.Since(start)
	pc := n.waitFor(t, "measure", crdv1alpha1.PacketCaptureComplete, 7000)
	// The file is complete when the condition is written; the poll's
	// 20 ms step bounds the error of this figure.
	done := time.Since(start)
	// Let the observers drain what the kernel queued for them: until
	// their files stop growing (bounded).
	for i, last := 0, -1; i < 30; i++ {
		time.Sleep(300 * time.Millisecond)
		now := fileSize(veth.file) + fileSize(mirror.file)
		if now == last {
			break
		}
		last = now
	}
	vethSaid, mirrorSaid := veth.stop(t), mirror.stop(t)
	file := n.localFile(t, pc)

	captured := capinfosCount(t, file)
	sawVeth, sawMirror := capinfosCount(t, veth.file), capinfosCount(t, mirror.file)
	var reason string
	for _, c := range pc.Status.Conditions {
		if c.Type == crdv1alpha1.PacketCaptureComplete {
			reason = c.Reason
		}
	}
	t.Logf("sent %d datagrams in %v (pause %v per 10); pcb received %d", sent, sendTime.Round(time.Millisecond), gap, received())
	t.Logf("PacketCapture (packet-in, meter %d pps): %d captured, complete (%s) %v after the first send",
		agentof.PacketCaptureRate, captured, reason, done.Round(10*time.Millisecond))
	t.Logf("tcpdump on the pod's veth: %d (%s)", sawVeth, lastLine(vethSaid))
	t.Logf("OVS mirror to an internal port, tcpdump (AF_PACKET) on it: %d (%s)", sawMirror, lastLine(mirrorSaid))

	if captured > sent {
		t.Errorf("the capture holds %d packets, more than the %d sent", captured, sent)
	}
	rows := tsharkFields(t, file, "ip.src", "ip.dst", "udp.srcport", "udp.dstport")
	want := n.a.IP.String() + "\t" + n.b.IP.String() + "\t" + strconv.Itoa(s.local.Port) + "\t5003"
	for _, r := range rows {
		if r != want {
			t.Fatalf("the capture holds %q, want only %q", r, want)
		}
	}
}

func fileSize(path string) int {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return int(st.Size())
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-2):], "; ")
}
