package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestIsWhatMakeManifestsRenders fails when build/yamls/antrea.yml
// is stale: the chart changed and `make manifests` was not run.
func TestManifestIsWhatMakeManifestsRenders(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "antrea.yml")
	_, errOut, err := run(t, nil, repoPath("hack/manifests.sh"), fresh)
	if err != nil {
		t.Fatalf("hack/manifests.sh: %v\n%s", err, errOut)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(repoPath(manifestFile))
	if err != nil {
		t.Fatalf("%v: run `make manifests` and commit %s", err, manifestFile)
	}
	if bytes.Equal(got, want) {
		return
	}
	diff, _, _ := run(t, nil, "diff", "-u", repoPath(manifestFile), fresh)
	const maxLines = 60
	lines := strings.Split(string(diff), "\n")
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], fmt.Sprintf("... (%d more lines)", len(lines)-maxLines))
	}
	t.Fatalf("%s is stale: it is not what the chart %s renders now.\n"+
		"Run `make manifests` and commit %s. Difference (committed -> rendered):\n%s",
		manifestFile, chartDir, manifestFile, strings.Join(lines, "\n"))
}

// TestChartLints runs helm lint, plain and --strict (warnings are errors).
func TestChartLints(t *testing.T) {
	for _, args := range [][]string{
		{"lint", repoPath(chartDir)},
		{"lint", "--strict", repoPath(chartDir)},
		{"lint", "--strict", repoPath(chartDir), "--set", "tunnelType=vxlan", "--set", "ovs.datapathType=netdev"},
	} {
		out, errOut, err := run(t, nil, helmBinary(t), args...)
		if err != nil {
			t.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	}
}

// TestBadValuesFailRenderingNamingTheValue: a value the components do not
// support fails `helm template` (and so `helm install`) with a message that
// names it, both through values.schema.json and, when the schema is skipped,
// through the chart's own checks (templates/_helpers.tpl).
func TestBadValuesFailRenderingNamingTheValue(t *testing.T) {
	tests := []struct {
		name string
		set  string
		// want is in the message of both checks.
		want string
	}{
		{"an unsupported tunnel type", "tunnelType=stt", "tunnelType"},
		{"a bogus OVS datapath type", "ovs.datapathType=bogus", "datapathType"},
		{"an unsupported traffic encap mode", "trafficEncapMode=networkPolicyOnly", "trafficEncapMode"},
		{"an unknown feature gate", "featureGates.Bogus=true", "Bogus"},
		{"a negative MTU", "defaultMTU=-1", "defaultMTU"},
		{"an MTU below IPv4's minimum", "defaultMTU=60", "defaultMTU"},
		{"a fractional log verbosity", "logVerbosity=1.5", "logVerbosity"},
		{"an unknown TLS version", "tlsMinVersion=VersionTLS9", "tlsMinVersion"},
		{"a nodePortAddresses entry that is no IPv4 CIDR", "antreaProxy.nodePortAddresses={fd00::/64}", "antreaProxy.nodePortAddresses"},
		{"skipServices, not implemented", "antreaProxy.skipServices={kube-system/kube-dns}", "antreaProxy.skipServices"},
		{"an unknown flow collector transport", "flowExporter.flowCollectorAddr=10.0.0.1:4739:sctp", "flowCollectorAddr"},
		{"a flow poll interval that is no duration", "flowExporter.flowPollInterval=5", "flowPollInterval"},
	}
	for _, tt := range tests {
		for _, skipSchema := range []bool{false, true} {
			name := tt.name + " fails the schema"
			args := renderArgs(tt.set)
			if skipSchema {
				name = tt.name + " fails the chart's checks"
				args = append(args, "--skip-schema-validation")
			}
			t.Run(name, func(t *testing.T) {
				out, errOut, err := run(t, nil, helmBinary(t), args...)
				if err == nil {
					t.Fatalf("helm template --set %s succeeded; rendered:\n%.400s", tt.set, out)
				}
				if !strings.Contains(string(errOut), tt.want) {
					t.Fatalf("helm template --set %s failed without naming %q:\n%s", tt.set, tt.want, errOut)
				}
			})
		}
	}
}

// TestBadTunnelTypeMessage pins the message of the chart's check: the same
// words antrea-agent uses for the same mistake in its conf file.
func TestBadTunnelTypeMessage(t *testing.T) {
	args := append(renderArgs("tunnelType=stt"), "--skip-schema-validation")
	_, errOut, err := run(t, nil, helmBinary(t), args...)
	const want = `tunnelType: "stt" is not supported (want geneve, vxlan or gre)`
	if err == nil || !strings.Contains(string(errOut), want) {
		t.Fatalf("want an error containing %q, got %v:\n%s", want, err, errOut)
	}
}

// TestConfigChecksumRollsThePodsOnlyWhenTheConfChanges: the checksum/config
// annotation of both Pod templates changes with the conf files (so that
// `kubectl apply` of a new configuration restarts the Pods) and with nothing
// else (so that an unrelated change does not restart the agents).
func TestConfigChecksumRollsThePodsOnlyWhenTheConfChanges(t *testing.T) {
	checksums := func(sets ...string) (agent, controller string) {
		objs := decode(t, render(t, sets...))
		agent = agentDaemonSet(t, objs).Spec.Template.Annotations["checksum/config"]
		controller = controllerDeployment(t, objs).Spec.Template.Annotations["checksum/config"]
		if len(agent) != 64 || len(controller) != 64 {
			t.Fatalf("want a sha256 checksum/config annotation on both Pod templates, got %q and %q", agent, controller)
		}
		return agent, controller
	}
	defAgent, defController := checksums()
	for _, set := range []string{"tunnelType=vxlan", "featureGates.AntreaProxy=false", "controller.selfSignedCert=false"} {
		agent, controller := checksums(set)
		if agent == defAgent || controller == defController {
			t.Errorf("--set %s changes antrea-config but not the checksum/config of both Pod templates", set)
		}
	}
	for _, set := range []string{"agentImage.tag=v9.9.9", "controllerImage.tag=v9.9.9", "agent.podLabels.team=net"} {
		agent, controller := checksums(set)
		if agent != defAgent || controller != defController {
			t.Errorf("--set %s leaves antrea-config as it is but changes a checksum/config", set)
		}
	}
}
