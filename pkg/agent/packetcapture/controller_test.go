package packetcapture

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

func TestMatchesTakeEachDirectionWithItsPortsAndThePodsPort(t *testing.T) {
	src, dst := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("10.10.1.3")
	spec := crdv1alpha1.PacketCaptureSpec{Direction: crdv1alpha1.CaptureDirectionBoth, Packet: &crdv1alpha1.Packet{
		TransportHeader: crdv1alpha1.TransportHeader{TCP: &crdv1alpha1.TCPHeader{DstPort: ptr.To[int32](80),
			Flags: []crdv1alpha1.TCPFlagsMatcher{{Value: 2}, {Value: 16, Mask: ptr.To[int32](18)}}}}}}
	got, err := Matches(spec, src, dst, 7, true)
	if err != nil {
		t.Fatal(err)
	}
	// Two flags matchers times two directions; the protocol comes from the
	// TCP header; the reply direction swaps addresses and ports and is not
	// matched at the source Pod's port.
	want := []agentof.PacketCaptureMatch{
		{InPort: 7, Src: src, Dst: dst, Proto: 6, DstPort: 80, TCPFlags: 2, TCPFlagsMask: 2},
		{Src: dst, Dst: src, Proto: 6, SrcPort: 80, TCPFlags: 2, TCPFlagsMask: 2},
		{InPort: 7, Src: src, Dst: dst, Proto: 6, DstPort: 80, TCPFlags: 16, TCPFlagsMask: 18},
		{Src: dst, Dst: src, Proto: 6, SrcPort: 80, TCPFlags: 16, TCPFlagsMask: 18},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d matches %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("match %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestMatchesOfICMPMessagesAtTheDestination(t *testing.T) {
	src, dst := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("10.10.2.3")
	spec := crdv1alpha1.PacketCaptureSpec{Direction: crdv1alpha1.CaptureDirectionDestinationToSource, Packet: &crdv1alpha1.Packet{
		Protocol: ptr.To(intstr.FromString("icmp")),
		TransportHeader: crdv1alpha1.TransportHeader{ICMP: &crdv1alpha1.ICMPHeader{Messages: []crdv1alpha1.ICMPMsgMatcher{
			{Type: intstr.FromString("icmp-unreach"), Code: ptr.To[int32](1)}, {Type: intstr.FromInt32(0)}}}}}}
	got, err := Matches(spec, src, dst, 9, false)
	if err != nil {
		t.Fatal(err)
	}
	// RFC 792: destination unreachable is type 3, echo reply type 0. The
	// destination Pod sends them: matched at its port.
	if len(got) != 2 || *got[0].ICMPType != 3 || *got[0].ICMPCode != 1 || *got[1].ICMPType != 0 || got[1].ICMPCode != nil {
		t.Fatalf("got %+v, want unreachable/1 then echo reply", got)
	}
	for _, m := range got {
		if m.InPort != 9 || m.Src != dst || m.Dst != src || m.Proto != 1 {
			t.Errorf("%+v: want ICMP from %s (port 9) to %s", m, dst, src)
		}
	}
}

func TestTheAgentAPIServesOnlyCompleteFilesItHolds(t *testing.T) {
	dir := t.TempDir()
	c := &Controller{cfg: Config{Dir: dir}, byName: map[string]*capture{"running": {}}}
	content := []byte("a pcapng file")
	if err := os.WriteFile(filepath.Join(dir, "done.pcapng"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		name string
		code int
		body string
	}{
		{"done", http.StatusOK, string(content)},
		{"running", http.StatusConflict, ""},
		{"other", http.StatusNotFound, ""},
		{"..%2Fdone", http.StatusNotFound, ""},
	} {
		resp, err := http.Get(srv.URL + APIPath + tc.name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || (tc.body != "" && string(body) != tc.body) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.code, tc.body)
		}
	}
}
