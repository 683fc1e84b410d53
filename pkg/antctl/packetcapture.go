package antctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// antctl packetcapture: upstream's command (create a PacketCapture from
// flags, wait until it is complete, save its pcapng file, delete it), and
// `antctl packetcapture NAME` for a capture made with kubectl. The file
// comes from the agent that holds it (status.filePath names its Pod,
// <antrea-agent-pod>:<path>) through its agent API's /packetcaptures/NAME,
// for clusters without a file server.

// packetCapturePath is where the agent API serves the files (pkg/agent/packetcapture.APIPath).
const packetCapturePath = "/packetcaptures/"

type packetCaptureOptions struct {
	o            *options
	source, dest string
	number       int32
	flow         string
	capturePoint string
	direction    string
	nowait       bool
	output       string
	timeout      time.Duration
	poll         time.Duration
}

func newPacketCaptureCommand(o *options) *cobra.Command {
	p := &packetCaptureOptions{o: o, poll: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:     "packetcapture (-S SRC | -D DST) [-f FLOW] [-n N] [-o DIR|FILE.pcapng] | packetcapture NAME [-o DIR|FILE.pcapng]",
		Aliases: []string{"pc", "packetcaptures"},
		Short:   "Capture the packets of a flow into a pcapng file",
		Long: `Capture the first packets of a flow between a Pod and a Pod or an IP: antctl
creates a PacketCapture (crd.antrea.io/v1alpha1), the agent of the capture
point's Node captures, and antctl waits until it is complete, saves the pcapng
file from that agent's API into -o (a directory, or a file ending in .pcapng;
- for stdout) and deletes the PacketCapture (unless --nowait, which only
creates it). With NAME instead of -S/-D, antctl saves the file of an existing
PacketCapture (one applied with kubectl) once it is complete.

-f gives the headers as ovs-ofctl spells them: a protocol (tcp, udp, icmp) and
tcp_src, tcp_dst, tcp_flags (+syn-ack: SYN set, ACK unset), udp_src, udp_dst,
icmp_type (a number or icmp-echo, icmp-echoreply, icmp-unreach,
icmp-timxceed), icmp_code. The PacketCapture feature gate must be on.`,
		Example: `  antctl packetcapture -S default/frontend -D default/backend -f tcp,tcp_dst=8080 -n 10 -o pc.pcapng
  antctl packetcapture -S frontend -D 10.10.1.5 -f udp,udp_dst=53 -d Both -o /tmp
  antctl packetcapture pc-test -o pc-test.pcapng`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return p.run(cmd.Context(), args, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&p.source, "source", "S", "", "Source: NS/POD, POD (in default) or an IPv4 address")
	f.StringVarP(&p.dest, "destination", "D", "", "Destination: NS/POD, POD (in default) or an IPv4 address")
	// No -n: it is the global --namespace here (upstream antctl has no such global).
	f.Int32Var(&p.number, "number", 1, "Number of packets to capture; the capture completes when they are in")
	f.StringVarP(&p.flow, "flow", "f", "", "Packet headers, e.g. tcp,tcp_dst=80,tcp_flags=+syn-ack")
	f.StringVarP(&p.capturePoint, "capture-point", "p", "", "Where to capture: Source or Destination (default: the source Pod)")
	f.StringVarP(&p.direction, "direction", "d", string(crdv1alpha1.CaptureDirectionSourceToDestination),
		"SourceToDestination, DestinationToSource or Both")
	f.BoolVar(&p.nowait, "nowait", false, "Create the PacketCapture, print its name and return")
	f.StringVarP(&p.output, "output-dir", "o", ".", "Directory to save NAME.pcapng in, or a file ending in .pcapng (- for stdout)")
	f.DurationVarP(&p.timeout, "timeout", "t", 60*time.Second, "How long the capture may run (whole seconds, up to 5m)")
	return cmd
}

func (p *packetCaptureOptions) run(ctx context.Context, args []string, stdout io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cl, err := p.o.getClients()
	if err != nil {
		return err
	}
	pcs := cl.Antrea.CrdV1alpha1().PacketCaptures()
	var name string
	if len(args) == 1 {
		if p.source != "" || p.dest != "" {
			return errors.New("give either NAME (an existing PacketCapture) or -S/-D (a new one), not both")
		}
		name = args[0]
	} else {
		pc, err := p.newPacketCapture()
		if err != nil {
			return err
		}
		if _, err := pcs.Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PacketCapture %s (is the PacketCapture feature gate on?): %w", pc.Name, err)
		}
		if p.nowait {
			fmt.Fprintf(stdout, "PacketCapture Name: %s\n", pc.Name)
			return nil
		}
		name = pc.Name
		defer func() {
			if err := pcs.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{}); err != nil {
				fmt.Fprintf(os.Stderr, "could not delete PacketCapture %s: %v\n", name, err)
			}
		}()
	}
	pc, err := waitComplete(ctx, p.timeout+10*time.Second, p.poll, func(ctx context.Context) (*crdv1alpha1.PacketCapture, error) {
		return pcs.Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return err
	}
	path, err := p.download(ctx, pc, stdout)
	if err != nil {
		return err
	}
	if path != "" {
		fmt.Fprintf(stdout, "Captured packets file: %s (%d packets)\n", path, pc.Status.NumberCaptured)
	}
	return nil
}

// download saves the file of a complete capture from its agent's API; it
// returns the path written ("" for stdout).
func (p *packetCaptureOptions) download(ctx context.Context, pc *crdv1alpha1.PacketCapture, stdout io.Writer) (string, error) {
	cl, err := p.o.getClients()
	if err != nil {
		return "", err
	}
	pod, _, ok := strings.Cut(pc.Status.FilePath, ":")
	if !ok || pod == "" || strings.Contains(pod, "/") {
		return "", fmt.Errorf("packet capture %s: status.filePath %q is not <antrea-agent-pod>:<path> (uploaded to a file server?)", pc.Name, pc.Status.FilePath)
	}
	agent, err := cl.Kube.CoreV1().Pods(antreaNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("packet capture %s: the agent that holds it: %w", pc.Name, err)
	}
	ac, err := p.o.agentClientFor(ctx, agent.Spec.NodeName)
	if err != nil {
		return "", err
	}
	path := p.output
	if path != "-" && !strings.HasSuffix(path, ".pcapng") {
		path = filepath.Join(path, pc.Name+".pcapng")
	}
	w, commit, err := outputFile(path, stdout)
	if err != nil {
		return "", err
	}
	status, err := httpGet(ctx, ac.http, ac.base+packetCapturePath+pc.Name, w)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("agent API of node %s: GET %s%s: %d %s", ac.node, packetCapturePath, pc.Name, status, http.StatusText(status))
	}
	if err := commit(err); err != nil {
		return "", err
	}
	if path == "-" {
		return "", nil
	}
	return path, nil
}

// newPacketCapture is the PacketCapture the flags describe.
func (p *packetCaptureOptions) newPacketCapture() (*crdv1alpha1.PacketCapture, error) {
	if p.source == "" && p.dest == "" {
		return nil, errors.New("give at least one of --source and --destination (or the NAME of an existing PacketCapture)")
	}
	if p.number < 1 {
		return nil, fmt.Errorf("--number %d: want at least 1", p.number)
	}
	if p.timeout < time.Second || p.timeout > 5*time.Minute {
		return nil, fmt.Errorf("--timeout %s: want 1s to 5m", p.timeout)
	}
	spec := crdv1alpha1.PacketCaptureSpec{
		Timeout:       ptr.To(int32(p.timeout / time.Second)),
		CaptureConfig: crdv1alpha1.CaptureConfig{FirstN: &crdv1alpha1.PacketCaptureFirstNConfig{Number: p.number}},
		Direction:     crdv1alpha1.CaptureDirection(p.direction),
		CapturePoint:  crdv1alpha1.CapturePoint(p.capturePoint),
	}
	var parts []string
	for _, e := range []struct {
		flag, value string
		pod         **crdv1alpha1.PodReference
		ip          **string
	}{{"--source", p.source, &spec.Source.Pod, &spec.Source.IP}, {"--destination", p.dest, &spec.Destination.Pod, &spec.Destination.IP}} {
		if e.value == "" {
			continue
		}
		parts = append(parts, strings.ReplaceAll(e.value, "/", "-"))
		if a, err := netip.ParseAddr(e.value); err == nil {
			*e.ip = ptr.To(a.String())
			continue
		}
		ns, name, ok := strings.Cut(e.value, "/")
		if !ok {
			ns, name = "default", e.value
		}
		if ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%s %q: want NS/POD, POD or an IP address", e.flag, e.value)
		}
		*e.pod = &crdv1alpha1.PodReference{Namespace: ns, Name: name}
	}
	if spec.Source.Pod == nil && spec.Destination.Pod == nil {
		return nil, errors.New("one of --source and --destination must be a Pod")
	}
	switch spec.Direction {
	case crdv1alpha1.CaptureDirectionSourceToDestination, crdv1alpha1.CaptureDirectionDestinationToSource, crdv1alpha1.CaptureDirectionBoth:
	default:
		return nil, fmt.Errorf("--direction %q: want SourceToDestination, DestinationToSource or Both", p.direction)
	}
	switch spec.CapturePoint {
	case "":
	case crdv1alpha1.CapturePointSource, crdv1alpha1.CapturePointDestination:
	default:
		return nil, fmt.Errorf("--capture-point %q: want Source or Destination", p.capturePoint)
	}
	packet, err := parseCaptureFlow(p.flow)
	if err != nil {
		return nil, err
	}
	spec.Packet = packet
	name := strings.ToLower(strings.Join(parts, "-")) + "-" + rand.String(8)
	return &crdv1alpha1.PacketCapture{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, nil
}

// tcpFlagBits are the TCP flags tcp_flags names (RFC 9293, section 3.1).
var tcpFlagBits = map[string]int32{"fin": 1, "syn": 2, "rst": 4, "psh": 8, "ack": 16, "urg": 32, "ece": 64, "cwr": 128}

// parseCaptureFlow reads -f into spec.packet (IPv4).
func parseCaptureFlow(flow string) (*crdv1alpha1.Packet, error) {
	pkt := &crdv1alpha1.Packet{IPFamily: corev1.IPv4Protocol}
	th := &pkt.TransportHeader
	port := func(k, v string) (*int32, error) {
		n, err := strconv.ParseUint(v, 0, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("-f %s=%s: want a port 1..65535", k, v)
		}
		return ptr.To(int32(n)), nil
	}
	var icmpCode *int32
	for _, field := range strings.Split(strings.ReplaceAll(flow, " ", ""), ",") {
		if field == "" {
			continue
		}
		k, v, _ := strings.Cut(field, "=")
		var err error
		switch k {
		case "tcp", "udp", "icmp":
			pkt.Protocol = ptr.To(intstr.FromString(strings.ToUpper(k)))
		case "tcp_src", "tcp_dst", "tcp_flags":
			if th.TCP == nil {
				th.TCP = &crdv1alpha1.TCPHeader{}
			}
			switch k {
			case "tcp_src":
				th.TCP.SrcPort, err = port(k, v)
			case "tcp_dst":
				th.TCP.DstPort, err = port(k, v)
			default:
				var m crdv1alpha1.TCPFlagsMatcher
				m, err = parseTCPFlags(v)
				th.TCP.Flags = []crdv1alpha1.TCPFlagsMatcher{m}
			}
		case "udp_src", "udp_dst":
			if th.UDP == nil {
				th.UDP = &crdv1alpha1.UDPHeader{}
			}
			if k == "udp_src" {
				th.UDP.SrcPort, err = port(k, v)
			} else {
				th.UDP.DstPort, err = port(k, v)
			}
		case "icmp_type":
			t := intstr.FromString(v)
			if n, perr := strconv.ParseUint(v, 0, 8); perr == nil {
				t = intstr.FromInt32(int32(n))
			}
			th.ICMP = &crdv1alpha1.ICMPHeader{Messages: []crdv1alpha1.ICMPMsgMatcher{{Type: t}}}
		case "icmp_code":
			n, perr := strconv.ParseUint(v, 0, 8)
			if perr != nil {
				return nil, fmt.Errorf("-f icmp_code=%s: want 0..255", v)
			}
			icmpCode = ptr.To(int32(n))
		default:
			return nil, fmt.Errorf("-f: unknown field %q; want tcp, udp, icmp, tcp_src, tcp_dst, tcp_flags, udp_src, udp_dst, icmp_type, icmp_code", k)
		}
		if err != nil {
			return nil, err
		}
	}
	if icmpCode != nil {
		if th.ICMP == nil {
			return nil, errors.New("-f: icmp_code needs icmp_type")
		}
		th.ICMP.Messages[0].Code = icmpCode
	}
	return pkt, nil
}

// parseTCPFlags reads +syn-ack: the named flags set (+) or unset (-).
func parseTCPFlags(s string) (crdv1alpha1.TCPFlagsMatcher, error) {
	var m crdv1alpha1.TCPFlagsMatcher
	mask := int32(0)
	for i := 0; i < len(s); {
		sign := s[i]
		if sign != '+' && sign != '-' {
			return m, fmt.Errorf("-f tcp_flags=%s: want +flag or -flag at %d", s, i+1)
		}
		j := i + 1
		for j < len(s) && s[j] != '+' && s[j] != '-' {
			j++
		}
		bit, ok := tcpFlagBits[s[i+1:j]]
		if !ok {
			return m, fmt.Errorf("-f tcp_flags=%s: unknown flag %q", s, s[i+1:j])
		}
		mask |= bit
		if sign == '+' {
			m.Value |= bit
		}
		i = j
	}
	m.Mask = &mask
	return m, nil
}

// waitComplete gets the PacketCapture until its PacketCaptureComplete
// condition is True, for up to wait.
func waitComplete(ctx context.Context, wait, poll time.Duration, get func(context.Context) (*crdv1alpha1.PacketCapture, error)) (*crdv1alpha1.PacketCapture, error) {
	deadline := time.Now().Add(wait)
	for {
		pc, err := get(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range pc.Status.Conditions {
			if c.Type == crdv1alpha1.PacketCaptureComplete && c.Status == metav1.ConditionTrue {
				return pc, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("packet capture %s is not complete after %v (%d packets so far)", pc.Name, wait, pc.Status.NumberCaptured)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// outputFile is where the file goes: stdout for "-", else a temporary
// file renamed to path once complete (removed on failure).
func outputFile(path string, stdout io.Writer) (io.Writer, func(error) error, error) {
	if path == "-" {
		return stdout, func(err error) error { return err }, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, nil, err
	}
	return f, func(err error) error {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
		}
		return err
	}, nil
}
