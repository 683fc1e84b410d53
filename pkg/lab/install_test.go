package lab

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

// The lab's overlay of build/yamls/antrea.yml yields conf files that the
// agent's and controller's own strict parsers accept, with the lab's values;
// --proxy kube-proxy turns AntreaProxy off.
func TestLabOverlayGivesConfFilesTheAgentAndControllerAccept(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "build", "yamls", ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, proxy := range []Proxy{ProxyAntrea, ProxyKube} {
		t.Run(string(proxy), func(t *testing.T) {
			o := testOptions(t)
			o.Proxy = proxy
			rendered, err := o.RenderManifest(src)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := splitYAML(rendered)
			if err != nil {
				t.Fatal(err)
			}
			var cm corev1.ConfigMap
			for _, d := range docs {
				var c corev1.ConfigMap
				if yaml.Unmarshal(d, &c) == nil && c.Kind == "ConfigMap" && c.Name == antreaConfigMap {
					cm = c
				}
			}
			agent, err := agentconfig.Parse("antrea-agent.conf", []byte(cm.Data["antrea-agent.conf"]))
			if err != nil {
				t.Fatalf("the agent refuses the lab's conf: %v", err)
			}
			if agent.OVSDatapathType != "netdev" || agent.TunnelType != o.Encap || agent.KubeAPIServerOverride == "" {
				t.Errorf("agent conf: datapath %q tunnel %q apiserver %q, want netdev, %s and the lab's API server",
					agent.OVSDatapathType, agent.TunnelType, agent.KubeAPIServerOverride, o.Encap)
			}
			if want := proxy == ProxyAntrea; agent.ProxyEnabled() != want {
				t.Errorf("--proxy %s: AntreaProxy enabled = %t, want %t", proxy, agent.ProxyEnabled(), want)
			}
			if _, err := controllerconfig.Parse("antrea-controller.conf", []byte(cm.Data["antrea-controller.conf"])); err != nil {
				t.Errorf("the controller refuses the lab's conf: %v", err)
			}
		})
	}
}

func TestSetConfKeyOfASectionNeedsTheSectionAndTheKey(t *testing.T) {
	conf := "a: 1\nantreaProxy:\n  # comment\n  enable: true\n  proxyAll: false\nb: 2\n"
	got, err := setConfKey(conf, "antreaProxy.enable", "false")
	if err != nil || got != "a: 1\nantreaProxy:\n  # comment\n  enable: false\n  proxyAll: false\nb: 2\n" {
		t.Errorf("setConfKey = %q, %v", got, err)
	}
	if _, err := setConfKey(conf, "antreaProxy.missing", "x"); err == nil {
		t.Error("a key missing from its section was not refused")
	}
	if _, err := setConfKey(conf, "b.enable", "x"); err == nil {
		t.Error("a key of a scalar was not refused")
	}
	if _, err := setConfKey(conf, "nosection.enable", "x"); err == nil {
		t.Error("a missing section was not refused")
	}
}
