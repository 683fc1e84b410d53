package nodenet

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/types"
)

// TestNodePortLocalWithTheRealNFT: the nodeportlocal feature against the
// real nft and kernel, in the namespaces of newNFTLab. Another node (the
// outside), the node's own processes and the pod itself reach the pod
// through node IP:node port; a node port mapped for TCP is not mapped for
// UDP; once the rules are gone nothing answers.
func TestNodePortLocalWithTheRealNFT(t *testing.T) {
	l := newNFTLab(t)
	l.serve(t, "tcp", 8080, "web")
	l.serve(t, "tcp", 8081, "admin")
	l.serve(t, "udp", 8080, "dns")
	pod := netip.MustParseAddr(podIP)
	rules := []NodePortLocalRule{
		{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.AddrPortFrom(pod, 8080)},
		{Protocol: types.ProtocolTCP, NodePort: 61001, Pod: netip.AddrPortFrom(pod, 8081)},
		{Protocol: types.ProtocolUDP, NodePort: 61002, Pod: netip.AddrPortFrom(pod, 8080)},
		// The IPv6 map is written beside the IPv4 one (no IPv6 in this lab).
		{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.MustParseAddrPort("[fd00:10:10::5]:8080")},
	}
	var table *Table
	ctx := context.Background()
	if err := l.node.Do(func(ns.NetNS) error {
		var err error
		if table, err = New(); err != nil {
			return err
		}
		return table.SetNodePortLocal(ctx, "antrea-gw0", rules)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.node.Do(func(ns.NetNS) error { return table.Remove(context.Background()) })
	})
	for _, tc := range []struct {
		name   string
		from   ns.NetNS
		proto  string
		addr   string
		answer string // "": no answer
	}{
		{"another node reaches the pod's port through the node port", l.peer, "tcp", nodeIP + ":61000", "web"},
		{"another node reaches a second port of the same pod", l.peer, "tcp", nodeIP + ":61001", "admin"},
		{"another node reaches the pod over UDP", l.peer, "udp", nodeIP + ":61002", "dns"},
		{"the node's own process reaches the pod through its node IP", l.node, "tcp", nodeIP + ":61000", "web"},
		{"the pod reaches itself through the node IP (hairpin)", l.pod, "tcp", nodeIP + ":61001", "admin"},
		{"a TCP node port is not mapped for UDP", l.peer, "udp", nodeIP + ":61000", ""},
		{"a UDP node port is not mapped for TCP", l.peer, "tcp", nodeIP + ":61002", ""},
		{"a port outside the mappings is not DNATed", l.peer, "tcp", nodeIP + ":61003", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := probe(tc.from, tc.proto, tc.addr)
			if tc.answer == "" {
				if err == nil {
					t.Errorf("%s %s answered %q, want no answer", tc.proto, tc.addr, got)
				}
				return
			}
			if err != nil || got != tc.answer {
				t.Errorf("%s %s answered %q (%v), want %q", tc.proto, tc.addr, got, err, tc.answer)
			}
		})
	}
	var listing string
	_ = l.node.Do(func(ns.NetNS) error {
		out, err := exec.Command("nft", "list", "map", "inet", TableName, nplMap(true)).CombinedOutput()
		listing = string(out)
		if err != nil {
			t.Errorf("nft list map: %v: %s", err, out)
		}
		return nil
	})
	if !strings.Contains(listing, "fd00:10:10::5 . 8080") {
		t.Errorf("the IPv6 map does not hold the IPv6 mapping:\n%s", listing)
	}

	// One mapping moves to another pod port; the others go away.
	if err := l.node.Do(func(ns.NetNS) error {
		return table.SetNodePortLocal(ctx, "antrea-gw0", []NodePortLocalRule{
			{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.AddrPortFrom(pod, 8081)}})
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := probe(l.peer, "tcp", nodeIP+":61000"); err != nil || got != "admin" {
		t.Errorf("after the rewrite, %s:61000 answered %q (%v), want admin", nodeIP, got, err)
	}
	if got, err := probe(l.peer, "tcp", nodeIP+":61001"); err == nil {
		t.Errorf("after the rewrite, %s:61001 still answered %q", nodeIP, got)
	}
	if err := l.node.Do(func(ns.NetNS) error { return table.RemoveNodePortLocal(ctx) }); err != nil {
		t.Fatal(err)
	}
	if got, err := probe(l.peer, "tcp", nodeIP+":61000"); err == nil {
		t.Errorf("after removal, %s:61000 still answered %q", nodeIP, got)
	}
}
