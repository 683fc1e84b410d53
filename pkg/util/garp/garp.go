// Package garp announces an IPv4 address on an Ethernet interface with
// gratuitous ARP (RFC 5227's announcement), so that the neighbours replace
// the MAC they hold for it: after the node's address moved from the uplink
// to br-phy (pkg/agent/nodeinit), and after an Egress or LoadBalancer IP
// moved to this node (pkg/agent/egress).
package garp

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Announce broadcasts count gratuitous ARP requests for ip from the
// interface ifName (with its MAC), interval apart. An IPv6 address is not
// announced (its neighbours learn from unsolicited NAs). Moving the node's
// address from the uplink to br-phy changes the MAC it answers with; the
// peers' kernels replace the entry they hold for ip on a gratuitous ARP (as
// STALE, confirmed by their next packet), and their ovs-vswitchd's userspace
// tunnel neighbour cache snoops it. Without it, a peer kept sending its
// tunnel packets to the uplink's old MAC, which br-phy does not pop, until
// its entry aged out: cross-node traffic from that peer black-holed for
// seconds after a node came up.
func Announce(ifName string, ip net.IP, count int, interval time.Duration) error {
	ip4 := ip.To4()
	if ip4 == nil {
		return nil // IPv6 neighbours learn from unsolicited NAs; not needed here
	}
	ifc, err := net.InterfaceByName(ifName)
	if err != nil {
		return err
	}
	if len(ifc.HardwareAddr) != 6 {
		return fmt.Errorf("interface %s has no Ethernet address", ifName)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifc.Index, Halen: 6}
	copy(to.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	frame := gratuitousARP(ifc.HardwareAddr, ip4)
	for i := 0; i < count; i++ {
		if i > 0 {
			time.Sleep(interval)
		}
		if err := unix.Sendto(fd, frame, 0, to); err != nil {
			return fmt.Errorf("send gratuitous ARP for %s on %s: %w", ip4, ifName, err)
		}
	}
	return nil
}

// gratuitousARP is an Ethernet broadcast ARP request whose sender and target
// address are both ip (RFC 5227's announcement).
func gratuitousARP(mac net.HardwareAddr, ip net.IP) []byte {
	f := make([]byte, 42)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_ARP)
	binary.BigEndian.PutUint16(f[14:16], 1)      // hardware type Ethernet
	binary.BigEndian.PutUint16(f[16:18], 0x0800) // protocol IPv4
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:22], 1) // request
	copy(f[22:28], mac)
	copy(f[28:32], ip)
	// target hardware address stays zero
	copy(f[38:42], ip)
	return f
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
