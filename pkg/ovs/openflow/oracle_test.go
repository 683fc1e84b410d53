package openflow

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// ofpParse feeds encoded messages to `ovs-ofctl ofp-parse`, an OpenFlow
// decoder we did not write, and returns what it printed for each message
// (one line per message, the header prefix "OFPT_X (OF1.5) (xid=0x1):" kept).
func ofpParse(t *testing.T, msgs ...[]byte) []string {
	t.Helper()
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Skip("needs ovs-ofctl (Open vSwitch)")
	}
	path := filepath.Join(t.TempDir(), "msgs.bin")
	var all []byte
	for _, m := range msgs {
		all = append(all, m...)
	}
	if err := os.WriteFile(path, all, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ovs-ofctl", "ofp-parse", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl ofp-parse: %v: %s", err, out)
	}
	// Each message starts a line with "OFPT_" or "NXT_"; continuation lines
	// (multi-line messages such as group mods) are joined with "\n".
	var res []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(line, "OFPT_") || strings.HasPrefix(line, "NXT_") || strings.HasPrefix(line, "OFPST_") || len(res) == 0 {
			res = append(res, line)
		} else {
			res[len(res)-1] += "\n" + line
		}
	}
	return res
}

// encDumpFlows returns the flows of a bridge as `ovs-ofctl -O OpenFlow15
// --no-stats dump-flows` prints them, one per line.
func encDumpFlows(t *testing.T, in *ovsinstance.Instance, bridge string, args ...string) []string {
	t.Helper()
	out, err := in.Ofctl("dump-flows", bridge, append([]string{"--no-stats"}, args...)...)
	if err != nil {
		t.Fatalf("dump-flows: %v", err)
	}
	var flows []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "OFPST_FLOW") || strings.HasPrefix(line, "NXST_FLOW") {
			continue
		}
		flows = append(flows, line)
	}
	return flows
}

// encBridge starts a private OVS instance with one netdev bridge.
func encBridge(t *testing.T) (*ovsinstance.Instance, string) {
	t.Helper()
	in := ovsinstance.StartForTest(t, "ofenc")
	const br = "br-ofenc"
	if _, err := in.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		t.Fatalf("add bridge: %v", err)
	}
	return in, br
}
