// Command serialexec runs one test binary at a time for go test's -exec flag:
//
//	go test -p 3 -exec "serialexec LOCKFILE" ./...
//
// go test then compiles and links packages in parallel while their test
// binaries run one after the other, each holding an exclusive flock(2) on
// LOCKFILE while it runs. Integration and lab tests here need the machine to
// themselves (OVS instances, control planes, one lab at a time), so they must
// not overlap; their compilation may.
//
// The lock is held by this process, not passed on: the test binary and the
// daemons it starts do not inherit it, so a process a test leaves behind
// cannot hold up the next package. Interrupt, termination and quit signals
// (go test's timeout sends SIGQUIT) are passed on to the test binary, which
// also dies with this process.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: serialexec LOCKFILE TEST-BINARY [ARGS...]")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1], os.Args[2], os.Args[3:]))
}

func run(lockPath, bin string, args []string) int {
	// Opened close-on-exec (Go's default): the child does not get the lock.
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "serialexec: %v\n", err)
		return 2
	}
	defer f.Close()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "serialexec: lock %s: %v\n", lockPath, err)
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	// Pdeathsig is bound to the thread that forks the child.
	runtime.LockOSThread()
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "serialexec: %v\n", err)
		return 2
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "serialexec: %v\n", err)
		return 2
	}
}
