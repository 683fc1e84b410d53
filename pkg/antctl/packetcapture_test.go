package antctl

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

func TestPacketCaptureFlagsMakeUpstreamsSpec(t *testing.T) {
	p := &packetCaptureOptions{source: "demo/client", dest: "10.10.1.5", number: 10, timeout: 30 * time.Second,
		direction: "Both", flow: "tcp,tcp_dst=8080,tcp_flags=+syn-ack"}
	pc, err := p.newPacketCapture()
	if err != nil {
		t.Fatal(err)
	}
	s := pc.Spec
	if s.Source.Pod == nil || s.Source.Pod.Namespace != "demo" || s.Source.Pod.Name != "client" || s.Destination.IP == nil ||
		*s.Destination.IP != "10.10.1.5" {
		t.Errorf("source %+v destination %+v: want pod demo/client to IP 10.10.1.5", s.Source, s.Destination)
	}
	if s.CaptureConfig.FirstN == nil || s.CaptureConfig.FirstN.Number != 10 || s.Timeout == nil || *s.Timeout != 30 ||
		s.Direction != crdv1alpha1.CaptureDirectionBoth {
		t.Errorf("firstN %+v, timeout %v, direction %q: want 10, 30 s, Both", s.CaptureConfig.FirstN, s.Timeout, s.Direction)
	}
	tcp := s.Packet.TransportHeader.TCP
	// SYN is bit 1 (2), ACK bit 4 (16): SYN set and ACK unset is 2 under mask 18.
	if *s.Packet.Protocol != intstr.FromString("TCP") || tcp == nil || *tcp.DstPort != 8080 || len(tcp.Flags) != 1 ||
		tcp.Flags[0].Value != 2 || *tcp.Flags[0].Mask != 18 {
		t.Errorf("packet %+v tcp %+v: want TCP to 8080 with flags 2/18", s.Packet, tcp)
	}
	if !strings.HasPrefix(pc.Name, "demo-client-10.10.1.5-") {
		t.Errorf("name %q: want demo-client-10.10.1.5-<random>", pc.Name)
	}
}

func TestPacketCaptureFlagsRefuseWhatUpstreamRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    packetCaptureOptions
		want string
	}{
		{"no ends", packetCaptureOptions{number: 1, timeout: time.Minute, direction: "Both"}, "at least one of --source"},
		{"two IPs", packetCaptureOptions{source: "10.0.0.1", dest: "10.0.0.2", number: 1, timeout: time.Minute, direction: "Both"}, "must be a Pod"},
		{"zero packets", packetCaptureOptions{source: "a", number: 0, timeout: time.Minute, direction: "Both"}, "--number"},
		{"a bad direction", packetCaptureOptions{source: "a", number: 1, timeout: time.Minute, direction: "Up"}, "--direction"},
		{"icmp_code alone", packetCaptureOptions{source: "a", number: 1, timeout: time.Minute, direction: "Both", flow: "icmp,icmp_code=1"}, "icmp_code needs icmp_type"},
		{"an unknown TCP flag", packetCaptureOptions{source: "a", number: 1, timeout: time.Minute, direction: "Both", flow: "tcp,tcp_flags=+foo"}, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.newPacketCapture()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
