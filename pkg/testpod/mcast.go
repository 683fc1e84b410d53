package testpod

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// mcastMagic starts every datagram mcast-send sends, before its sequence
// number and send time (Unix nanoseconds), so mcast-recv counts only those
// and measures their delivery latency (the lab's nodes share one clock).
const mcastMagic = "ANTREAMC"

// MulticastReport is what mcast-recv prints (JSON) when it ends.
type MulticastReport struct {
	Group string `json:"group"`
	// Joined says whether the socket joined the group.
	Joined bool `json:"joined"`
	// Datagrams are mcast-send's datagrams the socket read.
	Datagrams int `json:"datagrams"`
	// Frames are the IPv4 frames to the group eth0 received (an AF_PACKET
	// socket): what the network delivered, joined or not (the kernel
	// drops a group's datagrams the Pod did not join before any socket).
	Frames int `json:"frames"`
	// LatencyP50Micros and LatencyP99Micros are the datagrams' delivery
	// latencies (receive time minus send time), in microseconds.
	LatencyP50Micros int64 `json:"latencyP50Micros"`
	LatencyP99Micros int64 `json:"latencyP99Micros"`
}

// MulticastRecvConfig is mcast-recv's.
type MulticastRecvConfig struct {
	Group     netip.AddrPort
	Interface string
	For       time.Duration
	// NoJoin listens on the port without joining: only Frames can count.
	NoJoin bool
}

func mcastRecvCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	cfg := MulticastRecvConfig{Interface: "eth0"}
	var group string
	cmd := &cobra.Command{
		Use:   "mcast-recv --group GROUP:PORT --for DURATION [--no-join]",
		Short: "Join a multicast group for a while, then print what arrived (JSON): datagrams, frames at eth0, latency",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := parseGroup(group)
			if err != nil {
				return err
			}
			cfg.Group = g
			r, err := MulticastRecv(ctx, cfg)
			if err != nil {
				return err
			}
			return json.NewEncoder(stdout).Encode(r)
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "the group and UDP port, e.g. 225.1.2.3:5001")
	cmd.Flags().DurationVar(&cfg.For, "for", 10*time.Second, "how long to stay joined; leaving closes the socket (the kernel sends the leave)")
	cmd.Flags().BoolVar(&cfg.NoJoin, "no-join", false, "listen on the port without joining the group (count frames only)")
	cmd.Flags().StringVar(&cfg.Interface, "interface", cfg.Interface, "the interface to join on and count frames at")
	return cmd
}

// MulticastSendConfig is mcast-send's.
type MulticastSendConfig struct {
	Group     netip.AddrPort
	Interface string
	Count     int
	Interval  time.Duration
	TTL       int
}

func mcastSendCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	cfg := MulticastSendConfig{Interface: "eth0", Count: 10, Interval: 100 * time.Millisecond, TTL: 1}
	var group string
	cmd := &cobra.Command{
		Use:   "mcast-send --group GROUP:PORT [--count N] [--interval D]",
		Short: "Send N numbered, timestamped datagrams to a multicast group",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := parseGroup(group)
			if err != nil {
				return err
			}
			cfg.Group = g
			if cfg.Count < 1 {
				return fmt.Errorf("--count %d: want 1 or more", cfg.Count)
			}
			if err := MulticastSend(ctx, cfg); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "sent %d datagrams to %s\n", cfg.Count, cfg.Group)
			return nil
		},
	}
	cmd.Flags().StringVar(&group, "group", "", "the group and UDP port, e.g. 225.1.2.3:5001")
	cmd.Flags().IntVar(&cfg.Count, "count", cfg.Count, "how many datagrams")
	cmd.Flags().DurationVar(&cfg.Interval, "interval", cfg.Interval, "the time between two datagrams")
	cmd.Flags().IntVar(&cfg.TTL, "ttl", cfg.TTL, "the datagrams' TTL")
	cmd.Flags().StringVar(&cfg.Interface, "interface", cfg.Interface, "the interface to send from")
	return cmd
}

func parseGroup(s string) (netip.AddrPort, error) {
	g, err := netip.ParseAddrPort(s)
	if err != nil {
		return g, fmt.Errorf("--group %q: want GROUP:PORT, e.g. 225.1.2.3:5001", s)
	}
	if !g.Addr().Is4() || !g.Addr().IsMulticast() {
		return g, fmt.Errorf("--group %q: %s is not an IPv4 multicast address", s, g.Addr())
	}
	return g, nil
}

// MulticastSend sends cfg.Count datagrams to the group.
func MulticastSend(ctx context.Context, cfg MulticastSendConfig) error {
	c, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		return err
	}
	defer c.Close()
	pc := ipv4.NewPacketConn(c)
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return err
	}
	if err := pc.SetMulticastInterface(ifi); err != nil {
		return err
	}
	if err := pc.SetMulticastTTL(cfg.TTL); err != nil {
		return err
	}
	dst := net.UDPAddrFromAddrPort(cfg.Group)
	buf := make([]byte, len(mcastMagic)+16)
	copy(buf, mcastMagic)
	for i := 0; i < cfg.Count; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(cfg.Interval):
			}
		}
		binary.BigEndian.PutUint64(buf[len(mcastMagic):], uint64(i))
		binary.BigEndian.PutUint64(buf[len(mcastMagic)+8:], uint64(time.Now().UnixNano()))
		if _, err := pc.WriteTo(buf, nil, dst); err != nil {
			return fmt.Errorf("send to %s: %w", cfg.Group, err)
		}
	}
	return nil
}

// MulticastRecv joins the group (unless cfg.NoJoin) for cfg.For and
// reports what arrived.
func MulticastRecv(ctx context.Context, cfg MulticastRecvConfig) (*MulticastReport, error) {
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return nil, err
	}
	r := &MulticastReport{Group: cfg.Group.String(), Joined: !cfg.NoJoin}
	stopFrames, err := countFrames(ifi, cfg.Group.Addr())
	if err != nil {
		return nil, err
	}
	c, err := net.ListenPacket("udp4", "0.0.0.0:"+strconv.Itoa(int(cfg.Group.Port())))
	if err != nil {
		stopFrames()
		return nil, err
	}
	pc := ipv4.NewPacketConn(c)
	if !cfg.NoJoin {
		if err := pc.JoinGroup(ifi, &net.UDPAddr{IP: cfg.Group.Addr().AsSlice()}); err != nil {
			c.Close()
			stopFrames()
			return nil, fmt.Errorf("join %s on %s: %w", cfg.Group.Addr(), cfg.Interface, err)
		}
	}
	var lat []time.Duration
	seen := map[uint64]bool{}
	deadline := time.Now().Add(cfg.For)
	buf := make([]byte, 2048)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		_ = c.SetReadDeadline(deadline)
		n, _, err := c.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			c.Close()
			stopFrames()
			return nil, err
		}
		if n < len(mcastMagic)+16 || string(buf[:len(mcastMagic)]) != mcastMagic {
			continue
		}
		seq := binary.BigEndian.Uint64(buf[len(mcastMagic):])
		if seen[seq] {
			continue
		}
		seen[seq] = true
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(buf[len(mcastMagic)+8:])))
		lat = append(lat, now.Sub(sent))
	}
	// Closing the socket leaves the group: the kernel sends the leave.
	c.Close()
	r.Frames = stopFrames()
	r.Datagrams = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		r.LatencyP50Micros = lat[(len(lat)-1)*50/100].Microseconds()
		r.LatencyP99Micros = lat[(len(lat)-1)*99/100].Microseconds()
	}
	return r, nil
}

// countFrames counts the IPv4 frames to group that ifi receives (not
// those it sends) until stop, which returns the count.
func countFrames(ifi *net.Interface, group netip.Addr) (func() int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_IP)))
	if err != nil {
		return nil, fmt.Errorf("packet socket (needs CAP_NET_RAW): %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	var (
		mu    sync.Mutex
		count int
	)
	dst := group.As4()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 2048)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
					continue
				}
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			// SOCK_RAW on AF_PACKET: the Ethernet header is there.
			if n >= 34 && [4]byte(buf[30:34]) == dst {
				mu.Lock()
				count++
				mu.Unlock()
			}
		}
	}()
	return func() int {
		close(done)
		<-stopped
		unix.Close(fd)
		mu.Lock()
		defer mu.Unlock()
		return count
	}, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
