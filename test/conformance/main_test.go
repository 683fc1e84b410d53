package conformance

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// env is the lab shared by every test of the package. It is package-level
// because TestMain cannot hand values to tests any other way.
var env *labEnv

// labEnv is the running lab (started by this package, or reused).
type labEnv struct {
	*labtest.Lab
	skip string
	// probeIPv6: the probes dial, and the oracles judge, the pods' IPv6
	// addresses (envIPFamily).
	probeIPv6 bool
}

// Environment knobs (and labtest's ANTREA_BIN and ANTREA_LAB_KUBELET).
const (
	// envSelect chooses the cases: "all" runs every case, anything else
	// (or unset) the representative subset.
	envSelect = "ANTREA_CONFORMANCE"
	// envRuntime chooses the lab runtime when this package starts the lab
	// (default antrea; reference-cni, on simulated nodes only, does not
	// enforce NetworkPolicy: then the policy cases fail, as they must).
	envRuntime = "ANTREA_CONFORMANCE_RUNTIME"
	// envReuse set to 1 makes the package use a lab that is already Ready
	// instead of waiting for it to go away; such a lab is left running.
	envReuse = "ANTREA_CONFORMANCE_REUSE_LAB"
	// envCase runs only the cases whose name contains this string.
	envCase = "ANTREA_CONFORMANCE_CASE"
	// envIPFamily, ipv6 or dual, brings the lab up with that --ip-family
	// (when this package starts it) and probes the pods' IPv6 addresses:
	// every case on IPv6 pods, ipBlocks of IPv6 ranges (make conformance).
	envIPFamily = "ANTREA_CONFORMANCE_IP_FAMILY"
	// envNative: see native_test.go.
)

func TestMain(m *testing.M) {
	env = &labEnv{}
	opts := labtest.Options()
	if r := os.Getenv(envRuntime); r != "" {
		opts.Runtime = lab.NodeRuntime(r)
	}
	switch f := os.Getenv(envIPFamily); f {
	case "":
	case lab.IPFamilyDual, lab.IPFamilyV6:
		opts.IPFamily, env.probeIPv6 = f, true
	default:
		fmt.Fprintf(os.Stderr, "conformance: %s must be %s or %s, got %q\n", envIPFamily, lab.IPFamilyDual, lab.IPFamilyV6, f)
		os.Exit(2)
	}
	if reason := labtest.Check(&opts); reason != "" {
		env.skip = reason
		env.Lab = &labtest.Lab{Opts: opts}
		os.Exit(m.Run())
	}
	if err := env.start(opts); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: lab did not come up: %v\n", err)
		env.DumpLogs(os.Stderr, 3000)
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		}
		os.Exit(1)
	}
	native := os.Getenv(envNative) == "1"
	if native {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := installNative(ctx, env)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			env.DumpLogs(os.Stderr, 3000)
			if err := removeNative(env); err != nil {
				fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			}
			if err := env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			}
			os.Exit(1)
		}
		fmt.Printf("conformance: Antrea-native policies present (%s=1): %s and Antrea NetworkPolicy x/conformance-annp Realized\n",
			envNative, strings.Join(nativeACNPs, ", "))
	}
	code := m.Run()
	if native {
		if err := removeNative(env); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			code = 1
		}
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// start reuses a Ready lab when asked to, waits for someone else's lab to go
// away (it is theirs to stop), then starts its own.
func (e *labEnv) start(opts lab.Options) error {
	e.Lab = &labtest.Lab{Opts: opts}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	reuse := os.Getenv(envReuse) == "1"
	st, err := labtest.WaitForNoLab(ctx, opts, reuse, func(format string, args ...any) {
		fmt.Printf("conformance: "+format+"\n", args...)
	})
	if err != nil {
		if !reuse {
			err = fmt.Errorf("%w; set %s=1 to use a running lab", err, envReuse)
		}
		return err
	}
	if st != nil {
		if e.Lab, err = labtest.Attach(opts); err != nil {
			return err
		}
		fmt.Printf("conformance: reusing the running lab (runtime %s, kubelet %s, %d nodes); it stays up\n",
			e.Opts.Runtime, e.Opts.Kubelet, len(e.Nodes))
		return nil
	}
	e.Lab, err = labtest.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("conformance: lab (runtime %s, kubelet %s, %d nodes) Ready %.1fs after antrea-lab up\n",
		e.Opts.Runtime, e.Opts.Kubelet, len(e.Nodes), e.UpDuration.Seconds())
	return nil
}

// requireLab skips a test when the lab cannot run here.
func requireLab(t testing.TB) *labEnv {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return env
}

// selectAll reports whether every case should run.
func selectAll() bool { return strings.EqualFold(os.Getenv(envSelect), "all") }
