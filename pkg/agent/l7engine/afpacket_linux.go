package l7engine

import (
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Port is the engine's end of its OVS port: an AF_PACKET socket bound to
// the device, reading the frames OVS outputs to it (with the VLAN id the
// kernel took out of the frame, from PACKET_AUXDATA) and writing frames
// that OVS receives from it.
type Port struct {
	fd      int
	ifindex int
}

// htons is the network byte order of a 16-bit protocol number.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// OpenPort opens an AF_PACKET socket on device name.
func OpenPort(name string) (*Port, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("layer 7 engine port %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("layer 7 engine port %s: socket: %w", name, err)
	}
	p := &Port{fd: fd, ifindex: ifc.Index}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		p.Close()
		return nil, fmt.Errorf("layer 7 engine port %s: PACKET_AUXDATA: %w", name, err)
	}
	// A read times out now and then so that Run sees its context end.
	tv := unix.NsecToTimeval((500 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		p.Close()
		return nil, fmt.Errorf("layer 7 engine port %s: SO_RCVTIMEO: %w", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		p.Close()
		return nil, fmt.Errorf("layer 7 engine port %s: bind: %w", name, err)
	}
	return p, nil
}

// Read implements PacketIO: the next frame OVS sent, skipping the frames
// this socket (or anyone) sent out of the device.
func (p *Port) Read(buf []byte) (int, uint16, error) {
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.TpacketAuxdata{}))))
	for {
		n, oobn, _, from, err := unix.Recvmsg(p.fd, buf, oob, 0)
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				return 0, 0, errTimeout
			}
			return 0, 0, err
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		var vlan uint16
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA &&
					len(m.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
					aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
					if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
						vlan = aux.Vlan_tci & 0x0fff
					}
				}
			}
		}
		return n, vlan, nil
	}
}

// Write implements PacketIO.
func (p *Port) Write(frame []byte) error {
	return unix.Sendto(p.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: p.ifindex})
}

// Close closes the socket.
func (p *Port) Close() error { return unix.Close(p.fd) }
