package bridgetest

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// packetSocket opens an AF_PACKET socket bound to link of the calling
// thread's netns (call it inside Pod.Do), receiving every frame with a
// 100 ms timeout.
func packetSocket(link string) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return -1, err
	}
	ifc, err := net.InterfaceByName(link)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	}
	if err == nil {
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// receive passes each frame fd receives (not those the link sends) to f
// until stop is called; stop waits for the loop to end.
func receive(fd int, f func(frame []byte)) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 65536)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			f(buf[:n])
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Sniffer counts the IPv4 frames a netns's link receives, by "src>dst"
// (an AF_PACKET socket opened in that netns), until the test ends.
type Sniffer struct {
	mu   sync.Mutex
	seen map[string]int
}

// Sniff starts a Sniffer on link in p's netns (a Pod's, or any netns
// given as Pod{NS: name}).
func Sniff(t testing.TB, p *Pod, link string) *Sniffer {
	t.Helper()
	s := &Sniffer{seen: map[string]int{}}
	var fd int
	if err := p.Do(t, func() error {
		var err error
		fd, err = packetSocket(link)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stop := receive(fd, func(frame []byte) {
		if len(frame) < 34 || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_IP {
			return
		}
		k := net.IP(frame[26:30]).String() + ">" + net.IP(frame[30:34]).String()
		s.mu.Lock()
		s.seen[k]++
		s.mu.Unlock()
	})
	t.Cleanup(func() { stop(); unix.Close(fd) })
	return s
}

// Count is how many frames src>dst the link received.
func (s *Sniffer) Count(src, dst net.IP) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[src.String()+">"+dst.String()]
}

// Forward copies every frame one link of p receives to another (an inline
// appliance between a redirect's target and return ports) until stop is
// called; it returns how many it copied.
func Forward(t testing.TB, p *Pod, from, to string) (stop func() int) {
	t.Helper()
	var in, out int
	if err := p.Do(t, func() error {
		var err error
		if in, err = packetSocket(from); err != nil {
			return err
		}
		out, err = packetSocket(to)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	copied := 0
	halt := receive(in, func(frame []byte) {
		if _, err := unix.Write(out, frame); err == nil {
			mu.Lock()
			copied++
			mu.Unlock()
		}
	})
	var once sync.Once
	stop = func() int {
		once.Do(func() { halt(); unix.Close(in); unix.Close(out) })
		mu.Lock()
		defer mu.Unlock()
		return copied
	}
	t.Cleanup(func() { stop() })
	return stop
}
