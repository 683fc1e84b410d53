// Command antrea-pause is the lab's pod sandbox program, the /pause of the
// registry.k8s.io/pause image that kubelet pins: it holds the pod's
// namespaces, reaps the zombies of a shared PID namespace (it is PID 1 there)
// and exits at once on SIGINT or SIGTERM, as upstream's pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
