package antctl

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"antrea.io/antrea/pkg/antctl/query/querytest"
)

// The API tests read querytest's cluster (pkg/antctl/query/querytest).
type cluster = querytest.Cluster

var (
	web0      = querytest.Web0
	web1      = querytest.Web1
	client    = querytest.Client
	other     = querytest.Other
	atgWeb    = querytest.ATGWeb
	atgClient = querytest.ATGClient
	atgOther  = querytest.ATGOther
	agClient  = querytest.AGClient
	agWeb     = querytest.AGWeb
	npWeb     = querytest.NPWeb
	npClient  = querytest.NPClient
	npOther   = querytest.NPOther
)

func pod(ns, name, node, ip string) *corev1.Pod { return querytest.Pod(ns, name, node, ip) }

func defaultCluster() *cluster { return querytest.Default() }

// result is one antctl run.
type result struct {
	out, err string
	runErr   error
}

// runAntctl runs a command line against the cluster (nil: no API), out of
// local mode (an empty --config-dir) unless the args give a --config-dir.
func runAntctl(t *testing.T, c *cluster, args ...string) result {
	t.Helper()
	var clients *Clients
	if c != nil {
		clients = c.Clients()
	}
	return runAntctlWith(t, clients, args...)
}

// runAntctlWith runs a command line with these clients.
func runAntctlWith(t *testing.T, clients *Clients, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Out: &out, Err: &errb}
	if clients != nil {
		env.Clients = func() (*Clients, error) { return clients, nil }
	} else {
		env.Clients = func() (*Clients, error) { return nil, errors.New("this test has no API server") }
	}
	cmd := NewCommand(env)
	hasDir := false
	for _, a := range args {
		hasDir = hasDir || strings.HasPrefix(a, "--config-dir")
	}
	switch {
	case hasDir:
	case len(args) > 0 && args[0] == "__complete":
		// The last argument is the word to complete.
		args = append([]string{args[0], "--config-dir", t.TempDir()}, args[1:]...)
	default:
		args = append(args, "--config-dir", t.TempDir())
	}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return result{out: out.String(), err: errb.String(), runErr: err}
}

// forbidden answers as kube-apiserver does to an identity without the RBAC.
func forbidden(resource string) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
	}
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// rows splits a table into cells: columns are at least two blanks apart
// and no cell holds two blanks in a row.
func rows(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "" {
			continue
		}
		out = append(out, columnGap.Split(strings.TrimRight(l, " "), -1))
	}
	return out
}
