package labtest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// ConnectionsPerSecond opens and closes (with a reset) TCP connections to
// addr from netns client for d with 4 workers, and returns how many a
// second were set up: the benchmarks' connection rate. The loop is bounded
// by d.
func ConnectionsPerSecond(client ns.NetNS, addr string, d time.Duration) float64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = client.Do(func(ns.NetNS) error {
				end := time.Now().Add(d)
				for time.Now().Before(end) {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						continue
					}
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					c.Close()
					n.Add(1)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

// StreamMbits sends one TCP stream to addr from netns client for d and
// returns Mbit/s sent (0 if it could not connect).
func StreamMbits(client ns.NetNS, addr string, d time.Duration) float64 {
	var sent int64
	_ = client.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		end := time.Now().Add(d)
		_ = c.SetWriteDeadline(end)
		for time.Now().Before(end) {
			n, err := c.Write(buf)
			sent += int64(n)
			if err != nil {
				break
			}
		}
		return nil
	})
	return float64(sent) * 8 / 1e6 / d.Seconds()
}
