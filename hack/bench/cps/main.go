// Command cps measures TCP connections per second from the network namespace
// it runs in, for the benchmark scripts that run it inside a pod's or a test
// namespace (antrea-lab exec, ip netns exec):
//
//	cps serve ADDR            accept connections on ADDR and close them, for
//	                          at most -for (default 10m), then exit
//	cps dial ADDR             open and close (with a reset) connections to ADDR
//	                          for -for (default 3s) with 4 workers; print the
//	                          rate a second, rounded
//
// The dialling loop is labtest.ConnectionsPerSecond, the one the Services
// benchmark uses, so the figures of both benchmarks are the same measure.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/test/labtest"
)

func main() {
	fs := flag.NewFlagSet("cps", flag.ExitOnError)
	d := fs.Duration("for", 0, "how long to dial (default 3s) or serve (default 10m)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cps serve|dial ADDR [-for DURATION]")
		fs.PrintDefaults()
	}
	if len(os.Args) < 3 {
		fs.Usage()
		os.Exit(2)
	}
	mode, addr := os.Args[1], os.Args[2]
	_ = fs.Parse(os.Args[3:])
	var err error
	switch mode {
	case "serve":
		err = serve(addr, or(*d, 10*time.Minute))
	case "dial":
		err = dial(addr, or(*d, 3*time.Second))
	default:
		err = fmt.Errorf("unknown mode %q: want serve or dial", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cps:", err)
		os.Exit(1)
	}
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// serve accepts and closes connections on addr until d has passed.
func serve(addr string, d time.Duration) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	time.AfterFunc(d, func() { l.Close() })
	for {
		c, err := l.Accept()
		if err != nil {
			return nil // closed at the end of d
		}
		c.Close()
	}
}

// dial prints the connections a second set up to addr over d.
func dial(addr string, d time.Duration) error {
	here, err := ns.GetCurrentNS()
	if err != nil {
		return err
	}
	defer here.Close()
	// One connection first: a rate of 0 because nothing listens is an error.
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	c.Close()
	fmt.Printf("%.0f\n", labtest.ConnectionsPerSecond(here, addr, d))
	return nil
}
