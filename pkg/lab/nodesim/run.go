package nodesim

import (
	"context"
	"errors"
)

// Run simulates the node until ctx is cancelled. Pods are left as they are
// when it returns, so a restarted simulator adopts them; Cleanup removes them.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	return errors.New("nodesim: not implemented yet")
}

// Cleanup stops every pod process this node started and deletes every pod
// netns it created, from the state files under cfg.StateDir. The lab's down
// calls it; it does not need to run inside the node's netns.
func Cleanup(ctx context.Context, cfg Config) error {
	return errors.New("nodesim: not implemented yet")
}
