// Package e2e tests antrea-lab end to end: a real control plane and real
// nodes (kubelet, containerd and runc; or the node simulator with
// ANTREA_LAB_KUBELET=sim) in network namespaces, driven through the
// antrea-lab binary and kubectl as a user would. One 2-node lab is shared by
// the package (TestMain); the last test kills its supervisor with SIGKILL and
// checks that `down` still removes everything.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// env is what every test of the package shares: the lab TestMain started.
// It is package-level because TestMain cannot hand values to tests otherwise.
var env *labEnv

type labEnv struct {
	*labtest.Lab
	// before is the machine as it was before the lab.
	before snapshot
	skip   string
}

func TestMain(m *testing.M) {
	env = &labEnv{}
	opts := labtest.Options()
	if reason := labtest.Check(&opts); reason != "" {
		env.skip = reason
		env.Lab = &labtest.Lab{Opts: opts}
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), labtest.StartTimeout)
	// A lab left running (e.g. by make demo) holds the fixed namespaces.
	if out, err := labtest.Run(ctx, opts, "down"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: antrea-lab down before the tests: %v: %s\n", err, out)
		os.Exit(1)
	}
	env.before = takeSnapshot(opts.Dir)
	l, err := labtest.Start(ctx, opts)
	cancel()
	env.Lab = l
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: lab did not come up: %v\n", err)
		l.DumpLogs(os.Stderr, 4000)
		if err := l.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
		os.Exit(1)
	}
	fmt.Printf("e2e: lab with %d nodes (kubelet %s) Ready %.1fs after antrea-lab up\n", len(l.Nodes), l.Opts.Kubelet, l.UpDuration.Seconds())
	code := m.Run()
	if code != 0 {
		l.DumpLogs(os.Stderr, 3000)
	}
	if err := l.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// requireLab skips a test when the lab cannot run here.
func requireLab(t *testing.T) *labEnv {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return env
}

// requireReal skips a test that needs real nodes (kubelet and containerd).
func requireReal(t *testing.T) *labEnv {
	t.Helper()
	e := requireLab(t)
	if e.Opts.Kubelet != lab.KubeletReal {
		t.Skipf("needs real nodes; the lab runs --kubelet %s", e.Opts.Kubelet)
	}
	return e
}
