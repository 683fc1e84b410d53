package nodeportlocal

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"strconv"

	"antrea.io/antrea/pkg/agent/types"
)

// PortRange is nodePortLocal.portRange: the node ports NodePortLocal hands
// out, First to Last included.
type PortRange struct{ First, Last uint16 }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

func (r PortRange) size() int { return int(r.Last) - int(r.First) + 1 }

// Contains says whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= int(r.First) && port <= int(r.Last) }

// Opener holds a node port for one protocol and family, so that no process
// of the node binds it while a mapping uses it: upstream probes a port by
// binding it and keeps the socket open.
type Opener interface {
	Open(v6 bool, protocol uint8, port uint16) (io.Closer, error)
}

// SocketOpener binds the port on the family's wildcard address of the
// caller's network namespace (the node's): a TCP listener, a UDP socket.
// The kernel's DNAT in prerouting and output takes connections to the port
// before they reach the socket.
type SocketOpener struct{}

// Open implements Opener.
func (SocketOpener) Open(v6 bool, protocol uint8, port uint16) (io.Closer, error) {
	network, host := "4", "0.0.0.0"
	if v6 {
		network, host = "6", "::"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	switch protocol {
	case types.ProtocolTCP:
		return net.Listen("tcp"+network, addr)
	case types.ProtocolUDP:
		return net.ListenPacket("udp"+network, addr)
	}
	return nil, fmt.Errorf("protocol %d: only TCP and UDP", protocol)
}

// pool is the node ports of one family and protocol: a bitmap of the
// range (a set bit is a port in use, or one found bound by another
// process) and the socket of each port held. Allocation goes round the
// range from after the last port given, as upstream's, so a port just
// released is not handed out again at once.
type pool struct {
	r       PortRange
	used    []uint64
	next    int // offset in the range where the next search starts
	sockets map[uint16]io.Closer
}

func newPool(r PortRange) *pool {
	return &pool{r: r, used: make([]uint64, (r.size()+63)/64), sockets: map[uint16]io.Closer{}}
}

func (p *pool) isUsed(off int) bool { return p.used[off/64]&(1<<(off%64)) != 0 }
func (p *pool) set(off int)         { p.used[off/64] |= 1 << (off % 64) }
func (p *pool) clear(off int)       { p.used[off/64] &^= 1 << (off % 64) }

// free counts the ports not in use (bound elsewhere ones included).
func (p *pool) free() int {
	n := 0
	for _, w := range p.used {
		n += bits.OnesCount64(w)
	}
	return p.r.size() - n
}

// errNoPort says the range has no port left.
var errNoPort = errors.New("no free node port in the range")

// allocate holds the next port of the range that is neither in use nor
// bound by another process.
func (p *pool) allocate(open func(port uint16) (io.Closer, error)) (uint16, error) {
	n := p.r.size()
	for i := 0; i < n; i++ {
		off := (p.next + i) % n
		if p.isUsed(off) {
			continue
		}
		port := uint16(int(p.r.First) + off)
		c, err := open(port)
		if err != nil {
			continue // another process holds it: try the next one
		}
		p.set(off)
		p.sockets[port] = c
		p.next = (off + 1) % n
		return port, nil
	}
	return 0, fmt.Errorf("%w %s", errNoPort, p.r)
}

// reserve holds a given port (a mapping found in a Pod's annotation at
// start); it fails when the port is out of the range, in use, or bound by
// another process.
func (p *pool) reserve(port uint16, open func(port uint16) (io.Closer, error)) error {
	if !p.r.Contains(int(port)) {
		return fmt.Errorf("node port %d is outside the range %s", port, p.r)
	}
	off := int(port) - int(p.r.First)
	if p.isUsed(off) {
		return fmt.Errorf("node port %d is already in use", port)
	}
	c, err := open(port)
	if err != nil {
		return err
	}
	p.set(off)
	p.sockets[port] = c
	return nil
}

// release closes the port's socket and frees it.
func (p *pool) release(port uint16) {
	if !p.r.Contains(int(port)) {
		return
	}
	if c, ok := p.sockets[port]; ok {
		_ = c.Close()
		delete(p.sockets, port)
	}
	p.clear(int(port) - int(p.r.First))
}

// closeAll closes every socket (the controller stops).
func (p *pool) closeAll() {
	for port, c := range p.sockets {
		_ = c.Close()
		delete(p.sockets, port)
	}
}
