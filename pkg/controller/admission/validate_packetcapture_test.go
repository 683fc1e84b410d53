package admission

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// docPacketCaptures are the PacketCapture examples of docs/packetcapture.md
// (upstream's, unchanged).
func docPacketCaptures(t *testing.T) [][]byte {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../docs/packetcapture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: PacketCapture\n") {
			out = append(out, []byte(block))
		}
	}
	if len(out) != 2 {
		t.Fatalf("docs/packetcapture.md has %d PacketCapture examples, want upstream's 2", len(out))
	}
	return out
}

func TestUpstreamPacketCaptureExamplesAreAccepted(t *testing.T) {
	v := NewValidator(newFakeLookup(), controllerUser)
	for i, ex := range docPacketCaptures(t) {
		var pc crdv1alpha1.PacketCapture
		if err := yaml.UnmarshalStrict(ex, &pc); err != nil {
			t.Fatalf("example %d does not decode strictly: %v", i, err)
		}
		if errs := v.ValidatePacketCapture(context.Background(), &pc); len(errs) != 0 {
			t.Errorf("example %d refused: %v", i, errs)
		}
	}
}

func TestInvalidPacketCapturesAreRefusedNamingTheField(t *testing.T) {
	pod := func(name string) *crdv1alpha1.PodReference {
		return &crdv1alpha1.PodReference{Namespace: "default", Name: name}
	}
	valid := func() crdv1alpha1.PacketCaptureSpec {
		return crdv1alpha1.PacketCaptureSpec{
			CaptureConfig: crdv1alpha1.CaptureConfig{FirstN: &crdv1alpha1.PacketCaptureFirstNConfig{Number: 5}},
			Source:        crdv1alpha1.Source{Pod: pod("a")},
			Destination:   crdv1alpha1.Destination{IP: ptr.To("10.0.0.5")},
		}
	}
	udp := func(p intstr.IntOrString) *crdv1alpha1.Packet {
		return &crdv1alpha1.Packet{Protocol: &p, TransportHeader: crdv1alpha1.TransportHeader{UDP: &crdv1alpha1.UDPHeader{DstPort: ptr.To[int32](53)}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*crdv1alpha1.PacketCaptureSpec)
		field  string
	}{
		{"no source nor destination", func(s *crdv1alpha1.PacketCaptureSpec) {
			s.Source, s.Destination = crdv1alpha1.Source{}, crdv1alpha1.Destination{}
		}, "spec: Required value: at least one of source and destination"},
		{"no Pod", func(s *crdv1alpha1.PacketCaptureSpec) { s.Source = crdv1alpha1.Source{IP: ptr.To("10.0.0.4")} }, "spec: Required value: at least one of source.pod"},
		{"a Pod and an IP", func(s *crdv1alpha1.PacketCaptureSpec) { s.Source.IP = ptr.To("10.0.0.4") }, "spec.source: Invalid value"},
		{"a Pod without a name", func(s *crdv1alpha1.PacketCaptureSpec) { s.Source.Pod = pod("") }, "spec.source.pod.name: Required"},
		{"a bad IP", func(s *crdv1alpha1.PacketCaptureSpec) { s.Destination.IP = ptr.To("10.0.0") }, "spec.destination.ip: Invalid value"},
		{"an IPv6 address in IPv4", func(s *crdv1alpha1.PacketCaptureSpec) { s.Destination.IP = ptr.To("fd00::5") }, "spec.destination.ip: Invalid value"},
		{"no firstN", func(s *crdv1alpha1.PacketCaptureSpec) { s.CaptureConfig.FirstN = nil }, "spec.captureConfig.firstN: Required"},
		{"firstN 0", func(s *crdv1alpha1.PacketCaptureSpec) { s.CaptureConfig.FirstN.Number = 0 }, "spec.captureConfig.firstN.number: Invalid value"},
		{"timeout 301", func(s *crdv1alpha1.PacketCaptureSpec) { s.Timeout = ptr.To[int32](301) }, "spec.timeout: Invalid value"},
		{"an https file server", func(s *crdv1alpha1.PacketCaptureSpec) {
			s.FileServer = &crdv1alpha1.PacketCaptureFileServer{URL: "https://example.com:443/x"}
		}, "spec.fileServer.url: Invalid value"},
		{"an unknown direction", func(s *crdv1alpha1.PacketCaptureSpec) { s.Direction = "Up" }, "spec.direction: Unsupported value"},
		{"capture at a destination that is an IP", func(s *crdv1alpha1.PacketCaptureSpec) { s.CapturePoint = "Destination" }, "spec.capturePoint: Invalid value"},
		{"an unknown protocol", func(s *crdv1alpha1.PacketCaptureSpec) { s.Packet = udp(intstr.FromString("SCTPX")) }, "spec.packet.protocol: Invalid value"},
		{"a UDP header with TCP", func(s *crdv1alpha1.PacketCaptureSpec) { s.Packet = udp(intstr.FromString("TCP")) }, "spec.packet.transportHeader.udp: Invalid value"},
		{"port 0", func(s *crdv1alpha1.PacketCaptureSpec) {
			s.Packet = udp(intstr.FromString("udp"))
			s.Packet.TransportHeader.UDP.DstPort = ptr.To[int32](0)
		}, "spec.packet.transportHeader.udp.dstPort: Invalid value"},
		{"TCP flags 256", func(s *crdv1alpha1.PacketCaptureSpec) {
			p := intstr.FromInt32(6)
			s.Packet = &crdv1alpha1.Packet{Protocol: &p, TransportHeader: crdv1alpha1.TransportHeader{TCP: &crdv1alpha1.TCPHeader{
				Flags: []crdv1alpha1.TCPFlagsMatcher{{Value: 256}}}}}
		}, "spec.packet.transportHeader.tcp.flags[0].value: Invalid value"},
		{"an unknown ICMP type", func(s *crdv1alpha1.PacketCaptureSpec) {
			s.Packet = &crdv1alpha1.Packet{TransportHeader: crdv1alpha1.TransportHeader{ICMP: &crdv1alpha1.ICMPHeader{
				Messages: []crdv1alpha1.ICMPMsgMatcher{{Type: intstr.FromString("icmp-bogus")}}}}}
		}, "spec.packet.transportHeader.icmp.messages[0].type: Invalid value"},
		{"an unknown IP family", func(s *crdv1alpha1.PacketCaptureSpec) {
			s.Packet = &crdv1alpha1.Packet{IPFamily: corev1.IPFamily("IPv5")}
		}, "spec.packet.ipFamily: Unsupported value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := valid()
			if errs := NewValidator(newFakeLookup(), controllerUser).ValidatePacketCapture(context.Background(),
				&crdv1alpha1.PacketCapture{Spec: spec}); len(errs) != 0 {
				t.Fatalf("the valid spec is refused: %v", errs)
			}
			tc.change(&spec)
			errs := NewValidator(newFakeLookup(), controllerUser).ValidatePacketCapture(context.Background(), &crdv1alpha1.PacketCapture{Spec: spec})
			if !strings.Contains(errs.ToAggregate().Error(), tc.field) {
				t.Errorf("errors %v, want one saying %q", errs, tc.field)
			}
		})
	}
}

func TestAPacketCapturesSpecCannotChangeOnceCreated(t *testing.T) {
	h := Handlers(NewValidator(newFakeLookup(), controllerUser))[PathValidatePacketCapture]
	var old crdv1alpha1.PacketCapture
	if err := yaml.UnmarshalStrict(docPacketCaptures(t)[0], &old); err != nil {
		t.Fatal(err)
	}
	changed := old.DeepCopy()
	changed.Spec.CaptureConfig.FirstN.Number++
	resp := reviewUpdateWith(t, h, "PacketCapture", changed, &old)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec: Forbidden") {
		t.Errorf("a changed spec.captureConfig: allowed %v, %v; want refused naming spec", resp.Allowed, resp.Result)
	}
	labelled := old.DeepCopy()
	labelled.Labels = map[string]string{"team": "net"}
	if resp := reviewUpdateWith(t, h, "PacketCapture", labelled, &old); !resp.Allowed {
		t.Errorf("a new label was refused: %v", resp.Result)
	}
}
