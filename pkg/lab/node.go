package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"antrea.io/antrea/pkg/lab/nodesim"
)

// NodesimConfig is the node simulator's configuration for node n of a lab
// with these options. Its directories all live under the node's directory,
// so `down` removes them with the lab.
func (o Options) NodesimConfig(n NodeInfo, kubeconfig string) nodesim.Config {
	dir := o.nodeDir(n.Name)
	return nodesim.Config{
		NodeName:       n.Name,
		Kubeconfig:     kubeconfig,
		NodeIP:         net.ParseIP(n.IP),
		CNIConfDir:     filepath.Join(dir, "cni", "net.d"),
		CNIBinDirs:     []string{o.nodeCNIBinDir(n.Name), o.CNIBinDir},
		CNICacheDir:    filepath.Join(dir, "cni", "cache"),
		PodNetNSPrefix: PodNetNSPrefix,
		StateDir:       filepath.Join(dir, "state"),
		PodLogDir:      filepath.Join(o.logDir(), "pods"),
		TestPodBinary:  filepath.Join(o.BinDir, "antrea-testpod"),
		ReferenceCNI:   o.Runtime == RuntimeReferenceCNI,
	}
}

// startNode starts the node's daemons inside its netns: a real node
// (startRealNode), or the node simulator, preceded for the Antrea runtime by
// the node's OVS instance and antrea-agent.
func (s *supervisor) startNode(ctx context.Context, n NodeInfo, c *credentials) error {
	if s.opts.Kubelet == KubeletReal {
		return s.startRealNode(ctx, n, c)
	}
	cfg := s.opts.NodesimConfig(n, c.kubeconfigs[n.Name])
	for _, d := range []string{cfg.CNIConfDir, cfg.CNICacheDir, cfg.StateDir, cfg.PodLogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create dir %s of node %s: %w", d, n.Name, err)
		}
	}
	if s.opts.Runtime == RuntimeAntrea {
		// setns only (see below): the agent must see the pod netns mounts.
		if err := s.startAntreaNode(ctx, n, c, []string{"nsenter", "--net=" + netnsPath(n.NetNS), "--"}); err != nil {
			return err
		}
	}
	if _, err := os.Stat(cfg.TestPodBinary); err != nil {
		return fmt.Errorf("test pod program of node %s is missing (run make build): %w", n.Name, err)
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encode nodesim config of node %s: %w", n.Name, err)
	}
	path := filepath.Join(s.opts.nodeDir(n.Name), "nodesim.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write nodesim config of node %s: %w", n.Name, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the antrea-lab binary: %w", err)
	}
	// The simulator enters the node netns with setns only (nsenter), not `ip
	// netns exec`, whose private mount namespace would hide the pod netns
	// mounts it makes from the rest of the machine.
	_, err = s.startDaemonWith("nodesim", n.Name, n.NetNS, []string{"nsenter", "--net=" + netnsPath(n.NetNS), "--"},
		self, "nodesim", "--config", path)
	return err
}
