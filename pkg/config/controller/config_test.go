package controller

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/config/internal/strict"
)

func TestExampleFileHoldsTheDefaults(t *testing.T) {
	got, err := Load(filepath.Join("testdata", FileName))
	if err != nil {
		t.Fatal(err)
	}
	if want := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("testdata/%s:\n got %+v\nwant %+v", FileName, got, want)
	}
}

func TestEveryKeySetsItsField(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want func(c *ControllerConfig)
	}{
		{"an empty file gives the defaults", "", nil},
		{"upstream gates at their defaults are accepted and dropped", "featureGates:\n  AntreaPolicy: true\n  Traceflow: false\n  NodeIPAM: false\n", nil},
		{"clientConnection.kubeconfig sets the kubeconfig", "clientConnection:\n  kubeconfig: /kc\n",
			func(c *ControllerConfig) { c.ClientConnection.Kubeconfig = "/kc" }},
		{"apiPort sets the port", "apiPort: 10400\n", func(c *ControllerConfig) { c.APIPort = 10400 }},
		{"enablePrometheusMetrics can be turned off", "enablePrometheusMetrics: false\n",
			func(c *ControllerConfig) { c.EnablePrometheusMetrics = false }},
		{"selfSignedCert can be turned off", "selfSignedCert: false\n",
			func(c *ControllerConfig) { c.SelfSignedCert = false }},
		{"tlsCipherSuites takes Go's names", "tlsCipherSuites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\n",
			func(c *ControllerConfig) {
				c.TLSCipherSuites = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
			}},
		{"tlsMinVersion takes a version name", "tlsMinVersion: VersionTLS12\n",
			func(c *ControllerConfig) { c.TLSMinVersion = "VersionTLS12" }},
		{"serviceExternalIP.defaultExternalIPPool names a pool", "serviceExternalIP:\n  defaultExternalIPPool: lb-pool\n",
			func(c *ControllerConfig) { c.ServiceExternalIP.DefaultExternalIPPool = "lb-pool" }},
		{"kubeAPIServerOverride takes a URL", "kubeAPIServerOverride: https://cp:6443\n",
			func(c *ControllerConfig) { c.KubeAPIServerOverride = "https://cp:6443" }},
		{"upstream sections at their defaults are accepted",
			"nodeIPAM:\n  enableNodeIPAM: false\n  clusterCIDRs:\n  nodeCIDRMaskSizeIPv4: 24\nipsecCSRSigner:\n  autoApprove: true\n  selfSignedCA: true\nmulticluster:\n  enableStretchedNetworkPolicy: false\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(FileName, []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			if tc.want != nil {
				tc.want(want)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestBadValuesAreRefusedNamingTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"an unknown key is refused with the closest key", "apiPrt: 1\n",
			`antrea-controller.conf: unknown key "apiPrt" (did you mean "apiPort"?)`},
		{"an unknown feature gate is refused", "featureGates:\n  Tracefolw: true\n",
			`antrea-controller.conf: featureGates: unknown feature gate "Tracefolw" (did you mean "Traceflow"?)`},
		{"a gate off upstream cannot be turned on", "featureGates:\n  NodeIPAM: true\n",
			`antrea-controller.conf: featureGates.NodeIPAM: true is not supported by this Antrea`},
		{"a port out of range is refused", "apiPort: 0\n",
			`antrea-controller.conf: apiPort: 0 is not a port`},
		{"an unknown cipher suite is refused", "tlsCipherSuites: TLS_NOPE\n",
			`antrea-controller.conf: tlsCipherSuites: `},
		{"an unknown TLS version is refused", "tlsMinVersion: TLS1.2\n",
			`antrea-controller.conf: tlsMinVersion: `},
		{"an override without a host is refused", "kubeAPIServerOverride: https://\n",
			`antrea-controller.conf: kubeAPIServerOverride: "https://" has no host`},
		{"a default pool that is not an object name is refused", "serviceExternalIP:\n  defaultExternalIPPool: Not_A_Name\n",
			`antrea-controller.conf: serviceExternalIP.defaultExternalIPPool: "Not_A_Name" is not an ExternalIPPool name`},
		{"NodeIPAM cannot be enabled", "nodeIPAM:\n  enableNodeIPAM: true\n",
			`antrea-controller.conf: nodeIPAM.enableNodeIPAM: true is not supported by this Antrea (NodeIPAM is not implemented`},
		{"selfSignedCert given as a string is refused", "selfSignedCert: \"no\"\n",
			`antrea-controller.conf: selfSignedCert: want true or false, got "no"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(FileName, []byte(tc.yaml))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got error\n  %v\nwant one starting with\n  %s", err, tc.want)
			}
		})
	}
}

func TestCipherSuitesSplitsTheList(t *testing.T) {
	c := Defaults()
	if got := c.CipherSuites(); got != nil {
		t.Errorf("CipherSuites() of the defaults = %q, want nil", got)
	}
	c.TLSCipherSuites = "A, B"
	if got, want := c.CipherSuites(), []string{"A", "B"}; !reflect.DeepEqual(got, want) {
		t.Errorf("CipherSuites() = %q, want %q", got, want)
	}
}

func TestEveryKeyAndGateIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range strict.Keys(&ControllerConfig{}) {
		if !strings.Contains(string(doc), "`"+k) {
			t.Errorf("docs/configuration.md does not describe key %s", k)
		}
	}
	for _, g := range spec.Gates {
		if !strings.Contains(string(doc), "`"+g.Name+"`") {
			t.Errorf("docs/configuration.md does not list feature gate %s", g.Name)
		}
	}
}
