package antctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"

	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// fakeHost is a node's /proc, /sys, /lib/modules and /dev in a temporary
// directory, with link creation and OVSDB answered by the test.
func fakeHost(t *testing.T, files map[string]string, linkErr map[string]error, ovs string) *hostView {
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &hostView{procDir: filepath.Join(dir, "proc"), sysDir: filepath.Join(dir, "sys"),
		modulesDir: filepath.Join(dir, "lib/modules"), devDir: filepath.Join(dir, "dev"), release: "6.1.0-test",
		addLink: func(l netlink.Link) error { return linkErr[l.Type()] },
		ovsVersion: func(context.Context) (string, error) {
			if ovs == "" {
				return "", errors.New("dial unix /var/run/openvswitch/db.sock: connect: no such file or directory")
			}
			return ovs, nil
		},
		lookPath: func(p string) (string, error) { return "", errors.New("not found") },
	}
}

func verdicts(rs []checkResult) map[string]checkResult {
	m := map[string]checkResult{}
	for _, r := range rs {
		m[r.Check] = r
	}
	return m
}

func TestLocalChecks(t *testing.T) {
	system := agentconfig.Defaults()
	netdev := agentconfig.Defaults()
	netdev.OVSDatapathType = agentconfig.DatapathNetdev
	vxlan := agentconfig.Defaults()
	vxlan.TunnelType = agentconfig.TunnelVXLAN
	gre := agentconfig.Defaults()
	gre.TunnelType = agentconfig.TunnelGRE
	healthy := map[string]string{
		"lib/modules/6.1.0-test/modules.dep":        "kernel/net/openvswitch/openvswitch.ko.zst: kernel/net/nsh/nsh.ko.zst\nkernel/drivers/net/geneve.ko.zst:\n",
		"proc/sys/net/netfilter/nf_conntrack_count": "12\n",
		"sys/module/nf_conntrack/refcnt":            "3\n",
		"dev/net/tun":                               "",
	}
	noModules := map[string]string{"lib/modules/6.1.0-test/modules.dep": "kernel/drivers/net/tun.ko:\n", "dev/net/tun": ""}
	for _, tc := range []struct {
		name    string
		conf    *agentconfig.AgentConfig
		files   map[string]string
		linkErr map[string]error
		ovs     string
		want    map[string]string // check -> verdict
		fix     map[string]string // check -> part of the fix
	}{
		{name: "a healthy system-datapath node", conf: system, files: healthy, ovs: "3.5.1",
			want: map[string]string{"ovs": verdictPass, "datapath": verdictPass, "tunnel-geneve": verdictPass, "tunnel-vxlan": verdictPass, "tunnel-gre": verdictPass, "conntrack": verdictPass}},
		{name: "system datapath without the openvswitch module, geneve or conntrack", conf: system, files: noModules, ovs: "3.5.1",
			linkErr: map[string]error{"geneve": syscall.EOPNOTSUPP, "vxlan": syscall.EOPNOTSUPP, "gretap": syscall.EOPNOTSUPP},
			want:    map[string]string{"datapath": verdictFail, "tunnel-geneve": verdictFail, "tunnel-vxlan": verdictWarn, "tunnel-gre": verdictWarn, "conntrack": verdictFail},
			fix:     map[string]string{"datapath": "ovsDatapathType: netdev", "tunnel-geneve": "modprobe geneve", "tunnel-gre": "modprobe ip_gre", "conntrack": "modprobe nf_conntrack"}},
		{name: "gre in use without the ip_gre module", conf: gre, files: healthy, ovs: "3.5.1",
			linkErr: map[string]error{"gretap": syscall.EOPNOTSUPP},
			want:    map[string]string{"tunnel-geneve": verdictPass, "tunnel-gre": verdictFail},
			fix:     map[string]string{"tunnel-gre": "modprobe ip_gre"}},
		{name: "vxlan in use, geneve missing", conf: vxlan, files: healthy, ovs: "3.5.1",
			linkErr: map[string]error{"geneve": syscall.EOPNOTSUPP},
			want:    map[string]string{"tunnel-geneve": verdictWarn, "tunnel-vxlan": verdictPass}},
		{name: "netdev needs neither the module nor kernel tunnels", conf: netdev, files: noModules, ovs: "3.5.1",
			linkErr: map[string]error{"geneve": syscall.EOPNOTSUPP, "vxlan": syscall.EOPNOTSUPP, "gretap": syscall.EOPNOTSUPP},
			want:    map[string]string{"datapath": verdictPass, "tunnel-geneve": verdictPass, "tunnel-vxlan": verdictPass, "tunnel-gre": verdictPass, "conntrack": verdictWarn}},
		{name: "netdev without /dev/net/tun", conf: netdev, files: map[string]string{}, ovs: "3.5.1",
			want: map[string]string{"datapath": verdictFail}, fix: map[string]string{"datapath": "modprobe tun"}},
		{name: "no OVS at all", conf: system, files: healthy,
			want: map[string]string{"ovs": verdictFail}, fix: map[string]string{"ovs": "antrea-ovs"}},
		{name: "creating a tunnel refused", conf: system, files: healthy, ovs: "3.5.1",
			linkErr: map[string]error{"geneve": syscall.EPERM},
			want:    map[string]string{"tunnel-geneve": verdictFail}, fix: map[string]string{"tunnel-geneve": "as root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := verdicts(localChecks(context.Background(), tc.conf, fakeHost(t, tc.files, tc.linkErr, tc.ovs)))
			if len(got) != 6 {
				t.Errorf("%d checks, want ovs, datapath, tunnel-geneve, tunnel-vxlan, tunnel-gre, conntrack: %v", len(got), got)
			}
			for check, v := range tc.want {
				if got[check].Verdict != v {
					t.Errorf("%s: %s (%s), want %s", check, got[check].Verdict, got[check].Detail, v)
				}
				if v != verdictPass && got[check].Fix == "" && v != verdictSkip {
					t.Errorf("%s: %s without a fix", check, v)
				}
			}
			for check, f := range tc.fix {
				if !strings.Contains(got[check].Fix, f) {
					t.Errorf("%s: fix %q does not say %q", check, got[check].Fix, f)
				}
			}
			if tc.ovs != "" && !strings.Contains(got["ovs"].Detail, tc.ovs) {
				t.Errorf("ovs: %q does not name the version %s", got["ovs"].Detail, tc.ovs)
			}
		})
	}
}

func TestCheckBadInput(t *testing.T) {
	r := runAntctl(t, nil, "check", "clustr")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), `unknown check "clustr" for "antctl check" (did you mean "cluster"?)`) {
		t.Errorf("check clustr: %v", r.runErr)
	}
	r = runAntctl(t, nil, "check", "installation", "-o", "yml")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), `unknown output format "yml"`) {
		t.Errorf("-o yml: %v", r.runErr)
	}
}
