package manifest

import (
	"encoding/json"
	"os"
	"testing"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

// parseConfs loads the conf files of a rendering with the components' own
// loaders, as antrea-agent --config and antrea-controller --config do.
func parseConfs(t *testing.T, objs objects) (*agentconfig.AgentConfig, *controllerconfig.ControllerConfig) {
	t.Helper()
	data := configMap(t, objs).Data
	agent, err := agentconfig.Parse(agentconfig.FileName, []byte(data[agentconfig.FileName]))
	if err != nil {
		t.Errorf("antrea-agent would not start: %v", err)
	}
	controller, err := controllerconfig.Parse(controllerconfig.FileName, []byte(data[controllerconfig.FileName]))
	if err != nil {
		t.Errorf("antrea-controller would not start: %v", err)
	}
	return agent, controller
}

// TestConfFilesLoadInTheComponents: every rendering's conf files load with
// pkg/config (strict: no unknown key, every value valid).
func TestConfFilesLoadInTheComponents(t *testing.T) {
	forEachRendering(t, func(t *testing.T, objs objects) { parseConfs(t, objs) })
}

// TestChartDefaultsAreTheComponentsDefaults: the manifest configures the
// components as their defaults do (and as their commented examples,
// pkg/config/*/testdata, say), so that the chart's values.yaml and the
// components' defaults do not drift apart.
func TestChartDefaultsAreTheComponentsDefaults(t *testing.T) {
	agent, controller := parseConfs(t, decode(t, readManifest(t)))
	if t.Failed() {
		return
	}
	example := func(path string, parse func([]byte) (any, error)) any {
		data, err := os.ReadFile(repoPath(path))
		if err != nil {
			t.Fatal(err)
		}
		c, err := parse(data)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return c
	}
	for _, tt := range []struct {
		name              string
		got               any
		defaults, example any
	}{
		{"antrea-agent.conf", agent, agentconfig.Defaults(), example("pkg/config/agent/testdata/antrea-agent.conf",
			func(b []byte) (any, error) { return agentconfig.Parse(agentconfig.FileName, b) })},
		{"antrea-controller.conf", controller, controllerconfig.Defaults(), example("pkg/config/controller/testdata/antrea-controller.conf",
			func(b []byte) (any, error) { return controllerconfig.Parse(controllerconfig.FileName, b) })},
	} {
		// Compared as JSON: an empty list or map in the file and a nil one in
		// the defaults mean the same.
		got, defaults, example := mustJSON(t, tt.got), mustJSON(t, tt.defaults), mustJSON(t, tt.example)
		if got != defaults {
			t.Errorf("%s of the manifest is not the defaults:\n got %s\nwant %s", tt.name, got, defaults)
		}
		if got != example {
			t.Errorf("%s of the manifest is not the component's example:\n got %s\nwant %s", tt.name, got, example)
		}
	}
}

// TestValuesReachTheComponents: each value lands in the key the component
// reads.
func TestValuesReachTheComponents(t *testing.T) {
	agent, controller := parseConfs(t, decode(t, render(t,
		"tunnelType=vxlan", "ovs.datapathType=netdev", "ovs.bridgeName=br-test", "hostGateway=gw-test",
		"defaultMTU=1400", "transportInterface=eth1", "tunnelCsum=true",
		"featureGates.AntreaProxy=false", "antreaProxy.enable=false", "antreaProxy.proxyLoadBalancerIPs=false",
		"antreaProxy.healthzBindAddress=127.0.0.1:10257",
		"featureGates.FlowExporter=true", "flowExporter.enable=true", "flowExporter.flowCollectorAddr=10.0.0.9:4739:udp",
		"flowExporter.flowPollInterval=2s", "flowExporter.activeFlowExportTimeout=7s", "flowExporter.idleFlowExportTimeout=20s",
		"kubeAPIServerOverride=https://10.0.0.1:6443", "agent.apiPort=10450", "agent.enablePrometheusMetrics=false",
		"controller.apiPort=10449", "controller.enablePrometheusMetrics=false", "controller.selfSignedCert=false",
		"tlsCipherSuites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "tlsMinVersion=VersionTLS13")))
	if t.Failed() {
		return
	}
	checks := []struct {
		key       string
		got, want any
	}{
		{"tunnelType", agent.TunnelType, "vxlan"},
		{"ovsDatapathType", agent.OVSDatapathType, "netdev"},
		{"ovsBridge", agent.OVSBridge, "br-test"},
		{"hostGateway", agent.HostGateway, "gw-test"},
		{"defaultMTU", agent.DefaultMTU, 1400},
		{"transportInterface", agent.TransportInterface, "eth1"},
		{"tunnelCsum", agent.TunnelCsum, true},
		{"featureGates.AntreaProxy", agent.FeatureGates[agentconfig.AntreaProxy], false},
		{"antreaProxy.enable", agent.AntreaProxy.Enable, false},
		{"antreaProxy.proxyLoadBalancerIPs", agent.AntreaProxy.ProxyLoadBalancerIPs, false},
		{"antreaProxy.healthzBindAddress", agent.AntreaProxy.HealthzBindAddress, "127.0.0.1:10257"},
		{"featureGates.FlowExporter", agent.FeatureGates[agentconfig.FlowExporter], true},
		{"flowExporter.enable", agent.FlowExporter.Enable, true},
		{"flowExporter.flowCollectorAddr", agent.FlowExporter.FlowCollectorAddr, "10.0.0.9:4739:udp"},
		{"flowExporter.flowPollInterval", agent.FlowExporter.FlowPollInterval, "2s"},
		{"flowExporter.activeFlowExportTimeout", agent.FlowExporter.ActiveFlowExportTimeout, "7s"},
		{"flowExporter.idleFlowExportTimeout", agent.FlowExporter.IdleFlowExportTimeout, "20s"},
		{"agent kubeAPIServerOverride", agent.KubeAPIServerOverride, "https://10.0.0.1:6443"},
		{"agent apiPort", agent.APIPort, 10450},
		{"agent enablePrometheusMetrics", agent.EnablePrometheusMetrics, false},
		{"controller kubeAPIServerOverride", controller.KubeAPIServerOverride, "https://10.0.0.1:6443"},
		{"controller apiPort", controller.APIPort, 10449},
		{"controller enablePrometheusMetrics", controller.EnablePrometheusMetrics, false},
		{"selfSignedCert", controller.SelfSignedCert, false},
		{"tlsCipherSuites", controller.TLSCipherSuites, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
		{"tlsMinVersion", controller.TLSMinVersion, "VersionTLS13"},
	}
	for _, c := range checks {
		got, _ := json.Marshal(c.got)
		if want, _ := json.Marshal(c.want); string(got) != string(want) {
			t.Errorf("%s: the component reads %s, want %s", c.key, got, want)
		}
	}
}
