package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// NodeMounts is `antrea-lab node-mounts`: run as the first process of a real
// node's new mount namespace (`unshare --mount --propagation slave`), it
// makes the node's bind mounts, writes the ready file and waits until ctx
// ends. It holds the mount namespace that the node's containerd, kubelet and
// antrea-agent enter (nsenter -t PID -m -n); when the last of them exits, the
// namespace and every mount made in it (containers' rootfs, pod netns) go.
func NodeMounts(ctx context.Context, configPath string) error {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return fmt.Errorf("read node mounts: %w", err)
	}
	var cfg nodeMountsConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("decode node mounts %s: %w", configPath, err)
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	host, err := os.Readlink("/proc/1/ns/mnt")
	if err == nil && host == self {
		// Mounting here would change the host's filesystem view.
		return fmt.Errorf("node-mounts must run in a mount namespace of its own (unshare --mount), not the host's %s", host)
	}
	for _, b := range cfg.Binds {
		if err := unix.Mount(b.Source, b.Target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.Source, b.Target, err)
		}
		if b.Shared {
			// Still a slave of nothing on the host: only this node's
			// mounts under it propagate, and only to its containers.
			if err := unix.Mount("", b.Target, "", unix.MS_SHARED, ""); err != nil {
				return fmt.Errorf("make %s shared: %w", b.Target, err)
			}
		}
	}
	if err := os.WriteFile(cfg.Ready, []byte("ready\n"), 0o644); err != nil {
		return err
	}
	klog.InfoS("Node mount namespace ready", "mounts", len(cfg.Binds), "ns", self)
	klog.Flush()
	// Hold the namespace with the smallest process there is: sleep keeps
	// this PID (nsenter -t PID finds the namespace through it) and dies of
	// the supervisor's SIGTERM.
	if sleep, err := exec.LookPath("sleep"); err == nil {
		err = syscall.Exec(sleep, []string{"sleep", "infinity"}, os.Environ())
		klog.ErrorS(err, "Could not exec sleep; holding the mount namespace in this process")
	}
	<-ctx.Done()
	return nil
}
