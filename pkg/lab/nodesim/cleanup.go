package nodesim

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
)

// Cleanup stops every pod process this node started and deletes every pod
// netns it created, from the state files under cfg.StateDir. The lab's down
// calls it; it does not need to run inside the node's netns. It runs no CNI
// DEL: the whole node goes away with its network and IPAM state.
func Cleanup(ctx context.Context, cfg Config) error {
	if cfg.StateDir == "" {
		return errors.New("nodesim: cleanup: StateDir is required")
	}
	states, err := loadStates(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("nodesim: cleanup of node %s: %w", cfg.NodeName, err)
	}
	var errs []error
	for _, st := range states {
		for _, c := range st.Containers {
			if err := stopProcess(ctx, c.PID, c.StartTicks, stopGrace); err != nil {
				errs = append(errs, fmt.Errorf("pod %s container %s: %w", st.key(), c.Name, err))
			}
		}
		if err := deleteNetNS(ctx, st.NetNS); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", st.key(), err))
			continue
		}
		if err := removeState(cfg.StateDir, st); err != nil {
			errs = append(errs, err)
		}
		klog.InfoS("Removed pod sandbox", "node", cfg.NodeName, "pod", st.key(), "netns", st.NetNS)
	}
	return errors.Join(errs...)
}
