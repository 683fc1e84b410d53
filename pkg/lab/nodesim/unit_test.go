package nodesim

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestContainerProcessMapsAContainerToAProcess(t *testing.T) {
	binDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(binDir, "antrea-testpod"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := &simulator{cfg: Config{NodeName: "n1", TestPodBinary: filepath.Join(binDir, "antrea-testpod"), PodLogDir: "/logs"}}
	st := &podState{Namespace: "x", Name: "a", IPs: []string{"10.0.0.5"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a"}}
	tests := []struct {
		name       string
		container  corev1.Container
		wantPath   string
		wantArgs   []string
		wantProbes []probe
	}{
		{
			name:       "an image-only container without ports serves TCP and UDP 80 and 81",
			container:  corev1.Container{Name: "c", Image: "agnhost"},
			wantPath:   filepath.Join(binDir, "antrea-testpod"),
			wantArgs:   []string{"serve", "--name", "a", "--tcp", "80,81", "--udp", "80,81"},
			wantProbes: []probe{{"tcp", "80"}, {"tcp", "81"}, {"udp", "80"}, {"udp", "81"}},
		},
		{
			name: "an image-only container serves exactly its declared TCP and UDP ports",
			container: corev1.Container{Name: "c", Image: "agnhost", Ports: []corev1.ContainerPort{
				{ContainerPort: 8080}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9000, Protocol: corev1.ProtocolTCP}}},
			wantPath:   filepath.Join(binDir, "antrea-testpod"),
			wantArgs:   []string{"serve", "--name", "a", "--tcp", "8080,9000", "--udp", "53"},
			wantProbes: []probe{{"tcp", "8080"}, {"udp", "53"}, {"tcp", "9000"}},
		},
		{
			name:      "a container with a command runs the command and its args",
			container: corev1.Container{Name: "c", Image: "busybox", Command: []string{"/bin/sleep"}, Args: []string{"10"}},
			wantPath:  "/bin/sleep",
			wantArgs:  []string{"10"},
		},
		{
			name:      "a command without a path is found next to the test pod program first",
			container: corev1.Container{Name: "c", Image: "busybox", Command: []string{"antrea-testpod", "connect"}},
			wantPath:  filepath.Join(binDir, "antrea-testpod"),
			wantArgs:  []string{"connect"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, probes := sim.containerProcess(pod, st, tt.container)
			if spec.Path != tt.wantPath || !reflect.DeepEqual(spec.Args, tt.wantArgs) || !reflect.DeepEqual(probes, tt.wantProbes) {
				t.Fatalf("got %s %q probes %v, want %s %q probes %v", spec.Path, spec.Args, probes, tt.wantPath, tt.wantArgs, tt.wantProbes)
			}
			if spec.LogPath != "/logs/x_a_c.log" {
				t.Fatalf("log path %s", spec.LogPath)
			}
		})
	}
}

func TestRestartPolicyDecidesWhetherAnExitedProcessRestarts(t *testing.T) {
	tests := []struct {
		name   string
		policy corev1.RestartPolicy
		exit   *int
		want   bool
	}{
		{"Always restarts after success", corev1.RestartPolicyAlways, ptr.To(0), true},
		{"an empty policy means Always", "", ptr.To(1), true},
		{"OnFailure restarts after a failure", corev1.RestartPolicyOnFailure, ptr.To(2), true},
		{"OnFailure restarts after an unknown exit", corev1.RestartPolicyOnFailure, nil, true},
		{"OnFailure does not restart after success", corev1.RestartPolicyOnFailure, ptr.To(0), false},
		{"Never does not restart after a failure", corev1.RestartPolicyNever, ptr.To(1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := restartWanted(tt.policy, tt.exit); got != tt.want {
				t.Fatalf("restartWanted = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDesiredRoutesPointOtherNodesPodCIDRsAtTheirInternalIP(t *testing.T) {
	node := func(name, cidr, ip string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
		if ip != "" {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
		}
		return n
	}
	got := desiredRoutes("self", []*corev1.Node{
		node("self", "10.1.0.0/24", "192.0.2.1"),
		node("peer", "10.1.1.0/24", "192.0.2.2"),
		node("no-cidr-yet", "", "192.0.2.3"),
		node("no-address-yet", "10.1.3.0/24", ""),
	})
	if len(got) != 1 || got["10.1.1.0/24"].String() != "192.0.2.2" {
		t.Fatalf("desired routes %v, want only 10.1.1.0/24 via 192.0.2.2", got)
	}
}

func TestTheFirstCNIConfigInLexicalOrderIsUsed(t *testing.T) {
	dir := t.TempDir()
	ref, err := referenceConfList("10.9.0.0/24", "/ipam")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReferenceCNIConfFile), ref, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCNIConfList(t.TempDir()); err == nil {
		t.Fatal("an empty config dir loaded a network")
	}
	list, err := loadCNIConfList(dir)
	if err != nil || list.Name != "lab-bridge" || list.Plugins[0].Network.Type != "bridge" {
		t.Fatalf("reference conflist: %+v %v", list, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "05-antrea.conflist"),
		[]byte(`{"cniVersion":"1.0.0","name":"antrea","plugins":[{"type":"antrea"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err = loadCNIConfList(dir)
	if err != nil || list.Name != "antrea" {
		t.Fatalf("first conflist: %+v %v", list, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "01-single.conf"),
		[]byte(`{"cniVersion":"0.4.0","name":"single","type":"bridge"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err = loadCNIConfList(dir)
	if err != nil || list.Name != "single" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "bridge" {
		t.Fatalf("a single-plugin .conf first in order: %+v %v", list, err)
	}
	// DEL must be able to rebuild the list from the recorded bytes.
	again, err := libcni.ConfListFromBytes(list.Bytes)
	if err != nil || again.Name != "single" {
		t.Fatalf("recorded conflist: %+v %v", again, err)
	}
}

func TestAliveTellsARunningProcessFromAGoneOrReusedOne(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	_, ticks, err := procInfo(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !alive(cmd.Process.Pid, ticks) {
		t.Fatal("a running process is reported dead")
	}
	if alive(cmd.Process.Pid, ticks+1) {
		t.Fatal("a process with another start time is reported as the recorded one")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if alive(cmd.Process.Pid, ticks) {
		t.Fatal("a reaped process is reported alive")
	}
}

func TestStateRoundTripsThroughItsFile(t *testing.T) {
	dir := t.TempDir()
	st := &podState{Namespace: "x", Name: "a", UID: "u1", SandboxID: "s", NetNS: "p-u1", IPs: []string{"10.0.0.5"},
		ConfList: []byte(`{"name":"n"}`), Containers: []containerState{{Name: "c", PID: 42, StartTicks: 7, LastExitCode: ptr.To(3)}}}
	if err := saveState(dir, st); err != nil {
		t.Fatal(err)
	}
	got, err := loadStates(dir)
	if err != nil || len(got) != 1 {
		t.Fatalf("loadStates: %v %v", got, err)
	}
	var conf bytes.Buffer
	if err := json.Compact(&conf, got[0].ConfList); err != nil {
		t.Fatal(err)
	}
	if got[0].UID != "u1" || got[0].Containers[0].PID != 42 || *got[0].Containers[0].LastExitCode != 3 || conf.String() != `{"name":"n"}` {
		t.Fatalf("state %+v", got[0])
	}
	cp := got[0].deepCopy()
	cp.Containers[0].PID = 1
	*cp.Containers[0].LastExitCode = 9
	if got[0].Containers[0].PID != 42 || *got[0].Containers[0].LastExitCode != 3 {
		t.Fatal("deepCopy shares memory with the original")
	}
	if err := removeState(dir, st); err != nil {
		t.Fatal(err)
	}
	if left, _ := loadStates(dir); len(left) != 0 {
		t.Fatalf("state left after removeState: %v", left)
	}
}
