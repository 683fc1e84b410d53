package lab

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func testOptions(t *testing.T) Options {
	t.Helper()
	o := DefaultOptions()
	o.Dir = t.TempDir()
	// Tests run in pkg/lab: the checkout's _output is two levels up.
	o.KubeBinDir = filepath.Join("..", "..", "_output", "bin")
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// The kubelet configuration is decoded strictly into kubelet's own v1beta1
// types: a misspelt or removed field fails here, not as a kubelet that
// ignores it on a node.
func TestKubeletConfigurationIsAValidV1beta1ConfigWithTheLabSettings(t *testing.T) {
	o := testOptions(t)
	n := NodeInfo{Name: "node-1", NetNS: nodeNetNS(1), IP: "172.30.0.11"}
	data, err := o.kubeletConfig(n, nodeKubeletFiles{servingCert: "/pki/k.crt", servingKey: "/pki/k.key", clientCA: "/pki/ca.crt", resolvConf: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("kubelet would not read its configuration: %v\n%s", err, data)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"cgroup v1 accepted", *cfg.FailCgroupV1, false},
		{"cgroupfs driver", cfg.CgroupDriver, "cgroupfs"},
		{"cgroupRoot is the node's cgroup", cfg.CgroupRoot, "/antrea-lab-node-1"},
		{"no OOM score change of kubelet (no CAP_SYS_RESOURCE)", *cfg.OOMScoreAdj, int32(0)},
		{"swap tolerated", *cfg.FailSwapOn, false},
		{"no eviction on a shared disk", len(cfg.EvictionHard), 0},
		{"no image GC", *cfg.ImageGCHighThresholdPercent, int32(100)},
		{"serves on the node IP", cfg.Address, "172.30.0.11"},
		{"serving cert of the lab CA", cfg.TLSCertFile, "/pki/k.crt"},
		{"no anonymous access", *cfg.Authentication.Anonymous.Enabled, false},
		{"client certs of the lab CA", cfg.Authentication.X509.ClientCAFile, "/pki/ca.crt"},
		{"authorized by the API server", string(cfg.Authorization.Mode), "Webhook"},
		{"cluster DNS", strings.Join(cfg.ClusterDNS, ","), ClusterDNS},
		{"CRI endpoint is the node's containerd", cfg.ContainerRuntimeEndpoint, "unix://" + o.ContainerdSocket("node-1")},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// containerd itself reads the generated configuration: `containerd config
// dump` fails on a file it cannot parse and prints the values it will use.
func TestContainerdReadsTheNodeConfiguration(t *testing.T) {
	o := testOptions(t)
	bin := filepath.Join(o.KubeBinDir, "containerd")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is missing (hack/install.sh node)", bin)
	}
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(o.containerdConfig("node-1")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, "--config", path, "config", "dump")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("containerd config dump: %v\n%s", err, errOut.String())
	}
	dump := out.String()
	for _, want := range []string{
		"sandbox = '" + SandboxImage + "'",
		"restrict_oom_score_adj = true",
		"netns_mounts_under_state_dir = false", // pod netns in the node's own /var/run/netns
		"snapshotter = 'overlayfs'",
		"BinaryName = '" + filepath.Join(o.KubeBinDir, "runc") + "'",
		"SystemdCgroup = false",
		"config_path = '" + filepath.Join(o.containerdDir("node-1"), "certs.d") + "'",
		"address = '" + o.ContainerdSocket("node-1") + "'",
		"conf_dir = '/etc/cni/net.d'",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("containerd's effective configuration lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("containerd config dump:\n%s", dump)
	}
}

func TestRealNodesRefuseTheReferenceCNIRuntime(t *testing.T) {
	o := DefaultOptions()
	o.Runtime, o.Kubelet = RuntimeReferenceCNI, KubeletReal
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "--kubelet sim") {
		t.Fatalf("reference-cni on real nodes should be refused naming --kubelet sim, got %v", err)
	}
	o.Kubelet = "docker"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--kubelet") {
		t.Fatalf("an unknown --kubelet should be refused naming the flag, got %v", err)
	}
}

func TestCgroupTreeIsRemovedDeepestFirst(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "antrea-lab-node-1")
	for _, d := range []string{"kubepods/besteffort/pod1/ctr", "kubepods/burstable"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeCgroupTree(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("cgroup tree should be gone, stat: %v", err)
	}
	if err := removeCgroupTree(root); err != nil {
		t.Fatalf("removing a tree that is gone should succeed: %v", err)
	}
}
