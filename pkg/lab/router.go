package lab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The lab's router: BIRD 2 (Debian's bird2) in netns RouterNetNS at
// RouterIP, AS RouterASN. It accepts a BGP session from any address of the
// underlay in AS NodeASN (a dynamic neighbor range), imports every route
// into its table and exports none, so a BGPPolicy naming it as peer shows
// what the nodes advertise (docs/lab.md, "A world outside";
// docs/bgp-policy.md). Nothing is installed in any kernel: the router has
// no kernel protocol. With more than one underlay subnet (--subnets) it
// also forwards between them (the kernel of its netns, with connected
// routes only; subnets.go), and accepts the nodes of subnet S at its
// address there (one BGP protocol per subnet: eBGP peers are direct).
const (
	// RouterASN is the lab router's AS.
	RouterASN = 65000
	// NodeASN is the AS the router expects the lab's nodes in (a
	// BGPPolicy's localASN in the lab).
	NodeASN = 64512
)

// RouterIP is the lab router's address on the underlay (netns RouterNetNS).
func RouterIP() netip.Addr { return OutsideIP().Next() }

func (o Options) routerDir() string { return filepath.Join(o.Dir, "router") }

// RouterSocket is the control socket of the lab's BIRD: `birdc -s
// RouterSocket show route all` prints what it learnt.
func (o Options) RouterSocket() string { return filepath.Join(o.routerDir(), "bird.ctl") }

// routerConfig is BIRD's configuration of the lab router for an underlay
// of subnets subnets.
func routerConfig(subnets int) string {
	lines := []string{
		fmt.Sprintf("router id %s;", RouterIP()),
		"log stderr all;",
		"# Interfaces: BGP over the directly connected underlay needs them.",
		"protocol device {}",
		"# Every node of the underlay, from whichever address it connects.",
		"protocol bgp node {",
		fmt.Sprintf("  local %s as %d;", RouterIP(), RouterASN),
		fmt.Sprintf("  neighbor range %s as %d;", underlayPrefix, NodeASN),
		`  dynamic name "node";`,
		"  ipv4 { import all; export none; };",
		"}",
	}
	for s := 2; s <= subnets; s++ {
		lines = append(lines,
			fmt.Sprintf("# The nodes of subnet %d, at the router's address there.", s),
			fmt.Sprintf("protocol bgp subnet%d {", s),
			fmt.Sprintf("  local %s as %d;", routerIPIn(s), RouterASN),
			fmt.Sprintf("  neighbor range %s as %d;", subnetPrefix(s), NodeASN),
			fmt.Sprintf(`  dynamic name "node%ds";`, s),
			"  ipv4 { import all; export none; };",
			"}")
	}
	return strings.Join(lines, "\n") + "\n"
}

// startRouter writes BIRD's configuration and starts it in the
// foreground, in the router's netns, with its socket and PID file in the
// lab's directory.
func (s *supervisor) startRouter() error {
	bird, err := exec.LookPath("bird")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/bird"); serr != nil {
			return fmt.Errorf("the lab's router needs BIRD 2 (Debian's bird2; hack/install.sh installs it): %w", err)
		}
		bird = "/usr/sbin/bird"
	}
	dir := s.opts.routerDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(routerConfig(s.opts.subnets())), 0o644); err != nil {
		return err
	}
	_, err = s.startDaemon("router", "", RouterNetNS, bird, "-f", "-c", conf, "-s", s.opts.RouterSocket(),
		"-P", filepath.Join(dir, "bird.pid"))
	return err
}
