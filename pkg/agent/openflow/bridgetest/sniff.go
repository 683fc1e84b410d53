package bridgetest

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

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
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		ifc, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped; unix.Close(fd) })
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
			if n < 34 || binary.BigEndian.Uint16(buf[12:14]) != unix.ETH_P_IP {
				continue
			}
			k := net.IP(buf[26:30]).String() + ">" + net.IP(buf[30:34]).String()
			s.mu.Lock()
			s.seen[k]++
			s.mu.Unlock()
		}
	}()
	return s
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

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
		open := func(link string) (int, error) {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
			if err != nil {
				return -1, err
			}
			ifc, err := net.InterfaceByName(link)
			if err != nil {
				return -1, err
			}
			return fd, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
		}
		var err error
		if in, err = open(from); err != nil {
			return err
		}
		out, err = open(to)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(in, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var mu sync.Mutex
	copied := 0
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
			n, sa, err := unix.Recvfrom(in, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := sa.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if _, err := unix.Write(out, buf[:n]); err == nil {
				mu.Lock()
				copied++
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { close(done); <-stopped; unix.Close(in); unix.Close(out) })
		mu.Lock()
		defer mu.Unlock()
		return copied
	}
	t.Cleanup(func() { stop() })
	return stop
}
