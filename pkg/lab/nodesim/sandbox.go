package nodesim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"antrea.io/antrea/pkg/util/procfs"
)

// podIfName is the pod's interface, as kubelet names it.
const podIfName = "eth0"

// newSandboxID returns a random 64-hex-digit id, the form containerd uses.
func newSandboxID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("sandbox id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// podNetNSName is the pod's netns name: the prefix and a short pod UID.
func podNetNSName(prefix, uid string) string {
	short := strings.ReplaceAll(uid, "-", "")
	if len(short) > 12 {
		short = short[:12]
	}
	return prefix + short
}

func netnsExists(name string) bool {
	if name == "" {
		return false
	}
	// A bind-mounted netns file has the nsfs magic; a leftover plain file does not.
	n, err := ns.GetNS(netnsPath(name))
	if err != nil {
		return false
	}
	_ = n.Close()
	return true
}

// createNetNS creates the named netns with its loopback up. `ip netns add`
// also makes /var/run/netns a shared mount, so the netns is visible to
// every process on the machine (antrea-lab exec, the CNI plugins, tests).
func createNetNS(ctx context.Context, name string) error {
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("create netns %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	err := ns.WithNetNSPath(netnsPath(name), func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		return fmt.Errorf("bring lo up in netns %s: %w", name, err)
	}
	return nil
}

// deleteNetNS removes the named netns; a missing one is not an error.
func deleteNetNS(ctx context.Context, name string) error {
	if name == "" {
		// A hostNetwork pod has no netns of its own.
		return nil
	}
	if _, err := os.Stat(netnsPath(name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// Whatever still runs inside (a process whose PID was never recorded,
	// or one a container command spawned into a new session) goes with it.
	if err := stopProcessesInNetNS(ctx, netnsPath(name)); err != nil {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "delete", name).CombinedOutput(); err != nil {
		// `ip netns delete` fails on a plain file a crash left behind.
		if rmErr := os.Remove(netnsPath(name)); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return fmt.Errorf("delete netns %s: %w: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// loadCNIConfList reads the first CNI configuration in dir, in lexical order,
// as containerd does; a single-plugin .conf is wrapped into a list.
func loadCNIConfList(dir string) (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(dir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, fmt.Errorf("CNI config dir %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CNI configuration in %s", dir)
	}
	sort.Strings(files)
	f := files[0]
	if strings.HasSuffix(f, ".conflist") {
		list, err := libcni.ConfListFromFile(f)
		if err != nil {
			return nil, fmt.Errorf("CNI config %s: %w", f, err)
		}
		return list, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("CNI config %s: %w", f, err)
	}
	var single struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
	}
	if err := json.Unmarshal(b, &single); err != nil {
		return nil, fmt.Errorf("CNI config %s: %w", f, err)
	}
	wrapped, err := json.Marshal(map[string]any{
		"cniVersion": single.CNIVersion, "name": single.Name, "plugins": []json.RawMessage{b},
	})
	if err != nil {
		return nil, fmt.Errorf("CNI config %s: %w", f, err)
	}
	list, err := libcni.ConfListFromBytes(wrapped)
	if err != nil {
		return nil, fmt.Errorf("CNI config %s: %w", f, err)
	}
	return list, nil
}

// runtimeConf is what containerd passes to libcni for a pod sandbox.
func runtimeConf(s *podState) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: s.SandboxID,
		NetNS:       s.netnsPath(),
		IfName:      podIfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", s.Namespace},
			{"K8S_POD_NAME", s.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", s.SandboxID},
			{"K8S_POD_UID", s.UID},
		},
	}
}

// cniAdd attaches the sandbox to the network and returns the pod's IPs.
func (sim *simulator) cniAdd(ctx context.Context, s *podState, list *libcni.NetworkConfigList) ([]string, error) {
	res, err := sim.cni.AddNetworkList(ctx, list, runtimeConf(s))
	if err != nil {
		return nil, fmt.Errorf("CNI ADD %s for pod %s: %w", list.Name, s.key(), err)
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("CNI ADD %s for pod %s: result: %w", list.Name, s.key(), err)
	}
	// Prefer the addresses on the pod's own interface, as kubelet does
	// (other interfaces in the result may be host-side).
	var ips, anyIPs []string
	for _, ip := range r.IPs {
		if ip.Address.IP == nil {
			continue
		}
		anyIPs = append(anyIPs, ip.Address.IP.String())
		if ip.Interface != nil && *ip.Interface < len(r.Interfaces) {
			iface := r.Interfaces[*ip.Interface]
			if iface.Name == podIfName && iface.Sandbox != "" {
				ips = append(ips, ip.Address.IP.String())
			}
		}
	}
	if len(ips) == 0 {
		ips = anyIPs
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("CNI ADD %s for pod %s: the result has no IP", list.Name, s.key())
	}
	// IPv4 first, so podIP is the IPv4 address in a dual-stack result.
	sort.SliceStable(ips, func(i, j int) bool {
		return net.ParseIP(ips[i]).To4() != nil && net.ParseIP(ips[j]).To4() == nil
	})
	return ips, nil
}

// cniDel detaches the sandbox with the configuration its ADD used.
func (sim *simulator) cniDel(ctx context.Context, s *podState) error {
	if len(s.ConfList) == 0 {
		// ADD never ran: nothing to detach.
		return nil
	}
	list, err := libcni.ConfListFromBytes(s.ConfList)
	if err != nil {
		return fmt.Errorf("CNI DEL for pod %s: recorded config: %w", s.key(), err)
	}
	if err := sim.cni.DelNetworkList(ctx, list, runtimeConf(s)); err != nil {
		return fmt.Errorf("CNI DEL %s for pod %s: %w", list.Name, s.key(), err)
	}
	return nil
}

// stopProcessesInNetNS stops every process inside the netns bind-mounted at path.
func stopProcessesInNetNS(ctx context.Context, path string) error {
	pids, err := processesInNetNS(path)
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range pids {
		_, ticks, err := procInfo(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if err := stopProcess(ctx, pid, ticks, stopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// processesInNetNS lists the live processes whose network namespace is the one
// bind-mounted at path, by comparing /proc/PID/ns/net with it.
func processesInNetNS(path string) ([]int, error) {
	ns, err := procfs.NetNSOf(path)
	if err != nil {
		return nil, nil // not a netns (or gone): nothing can run in it
	}
	all, err := procfs.PIDsInNetNS(ns)
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	for _, pid := range all {
		if pid == self {
			continue
		}
		if state, _, err := procInfo(pid); err == nil && state != 'Z' && state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
