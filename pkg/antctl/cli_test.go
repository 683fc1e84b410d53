package antctl

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestHelpListsEveryCommand(t *testing.T) {
	root := NewCommand(Env{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.HasAvailableSubCommands() {
			return
		}
		r := runAntctl(t, nil, append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "antctl")), "--help")...)
		if r.runErr != nil {
			t.Fatalf("%s --help: %v", c.CommandPath(), r.runErr)
		}
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			if !strings.Contains(r.out, "\n  "+sub.Name()+" ") {
				t.Errorf("%s --help does not list %s:\n%s", c.CommandPath(), sub.Name(), r.out)
			}
			walk(sub)
		}
	}
	// cobra adds its completion command when it runs: run once first.
	root.SetArgs([]string{"--help"})
	root.SetOut(&strings.Builder{})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	walk(root)
	for _, want := range []string{"version", "get", "completion"} {
		if c, _, err := root.Find([]string{want}); err != nil || c.Name() != want {
			t.Errorf("antctl has no %s command", want)
		}
	}
	for _, want := range []string{"networkpolicy", "appliedtogroup", "addressgroup", "podinterface", "ovsflows", "featuregates"} {
		if c, _, err := root.Find([]string{"get", want}); err != nil || c.Name() != want {
			t.Errorf("antctl get has no %s", want)
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // lines the output holds
	}{
		{"bash script", []string{"completion", "bash"}, []string{"__start_antctl()"}},
		{"zsh script", []string{"completion", "zsh"}, []string{"#compdef antctl"}},
		{"resources of get", []string{"__complete", "get", "net"}, []string{"networkpolicy\tShow the NetworkPolicies computed by the controller"}},
		{"table names", []string{"__complete", "get", "ovsflows", "-T", "Ingr"},
			[]string{"IngressRule\t", "IngressDefaultRule\t", ":4"}},
		{"output formats", []string{"__complete", "get", "networkpolicy", "-o", ""}, []string{"table", "json", "yaml"}},
		{"nodes from the API", []string{"__complete", "get", "networkpolicy", "--node", "node-"}, []string{"node-1", "node-2"}},
		{"pods of -n from the API", []string{"__complete", "get", "appliedtogroup", "-n", "demo", "-p", "w"}, []string{"web-0", "web-1"}},
		{"namespaces from the API", []string{"__complete", "get", "networkpolicy", "-n", "de"}, []string{"default", "demo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAntctl(t, defaultCluster(), tc.args...)
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			for _, w := range tc.want {
				found := false
				for _, l := range strings.Split(r.out, "\n") {
					found = found || strings.HasPrefix(l, w)
				}
				if !found {
					t.Errorf("antctl %s printed\n%s\nwithout a line starting %q", strings.Join(tc.args, " "), r.out, w)
				}
			}
		})
	}
}

func TestLocalCommandsFromALaptopSayWhereToRunThem(t *testing.T) {
	c := defaultCluster()
	c.Extra = []runtime.Object{
		antreaPod("antrea-agent", "antrea-agent-a1", "node-1", "antrea/antrea-agent:latest", "", true),
		antreaPod("antrea-agent", "antrea-agent-b2", "node-2", "antrea/antrea-agent:latest", "", true),
	}
	r := runAntctl(t, c, "get", "ovsflows", "-p", web1.Name, "-n", web1.Namespace, "-T", "Classifier")
	// The agent API of web-1's node is tried first (its Node has no
	// address here), then the agent container is named.
	want := "node node-2 has no InternalIP to reach its agent API at; or run it in the antrea-agent container"
	how := "kubectl -n kube-system exec antrea-agent-b2 -c antrea-agent -- antctl get ovsflows -n demo -p web-1 -T Classifier"
	if r.runErr == nil || !strings.HasPrefix(r.runErr.Error(), want) || !strings.Contains(r.runErr.Error(), how) {
		t.Errorf("error %v, want %q ... %q (the agent of web-1's node)", r.runErr, want, how)
	}
	r = runAntctl(t, c, "get", "podinterface")
	if how := "kubectl -n kube-system exec ds/antrea-agent -c antrea-agent -- antctl get podinterface"; r.runErr == nil || !strings.Contains(r.runErr.Error(), how) {
		t.Errorf("error %v, want it to say %q", r.runErr, how)
	}
}
