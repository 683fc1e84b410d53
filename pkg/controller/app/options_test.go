package app

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// parse runs what cmd/antrea-controller runs: flags, then Complete.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("antrea-controller", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o, o.Complete(fs)
}

func writeConf(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "antrea-controller.conf")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// settings are the options the config file can set.
type settings struct {
	Kubeconfig, Override   string
	Port                   int
	SelfSigned             bool
	CipherSuites           []string
	MinTLSVersion, CertDir string
}

func settingsOf(o *Options) settings {
	s := o.APIServer.SecureServing
	return settings{o.Kubeconfig, o.KubeAPIServerOverride, s.BindPort, o.SelfSignedCert, s.CipherSuites,
		s.MinTLSVersion, s.ServerCert.CertDirectory}
}

func TestOptionsWithoutConfigAreUpstreamDefaults(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := settings{Port: 10349, SelfSigned: true, CertDir: "/var/run/antrea/antrea-controller-tls"}
	if got := settingsOf(o); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestOptionsFromConfigFile(t *testing.T) {
	conf := writeConf(t, `
clientConnection:
  kubeconfig: /etc/antrea/kubeconfig
apiPort: 10400
selfSignedCert: false
tlsCipherSuites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
tlsMinVersion: VersionTLS12
kubeAPIServerOverride: https://10.0.0.1:6443
`)
	fromFile := settings{Kubeconfig: "/etc/antrea/kubeconfig", Override: "https://10.0.0.1:6443", Port: 10400,
		CipherSuites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, MinTLSVersion: "VersionTLS12",
		CertDir: "/var/run/antrea/antrea-controller-tls"}
	for _, tc := range []struct {
		name string
		args []string
		want func(s *settings)
	}{
		{name: "every key of the file maps to its option", want: func(*settings) {}},
		{name: "an explicit flag overrides the file",
			args: []string{"--kubeconfig=/lab/kc", "--secure-port=10349", "--tls-min-version=VersionTLS13",
				"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
			want: func(s *settings) {
				s.Kubeconfig, s.Port, s.MinTLSVersion = "/lab/kc", 10349, "VersionTLS13"
				s.CipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
			}},
		{name: "flags the file has no key for keep their value",
			args: []string{"--cert-dir=/lab/certs"},
			want: func(s *settings) { s.CertDir = "/lab/certs" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(t, append([]string{"--config", conf}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			want := fromFile
			tc.want(&want)
			if got := settingsOf(o); !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestABadConfigFileFailsNamingTheKey(t *testing.T) {
	conf := writeConf(t, "apiPort: 0\n")
	_, err := parse(t, "--config="+conf)
	if err == nil || !strings.Contains(err.Error(), "antrea-controller.conf: apiPort: 0 is not a port") {
		t.Errorf("got %v, want an error naming apiPort", err)
	}
}

func TestProvidedCertificateIsReadFromTheCertDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.SelfSignedCert = false
	o.APIServer.SecureServing.ServerCert.CertDirectory = dir
	if err := o.completeServing(); err != nil {
		t.Fatal(err)
	}
	ck := o.APIServer.SecureServing.ServerCert.CertKey
	if ck.CertFile != filepath.Join(dir, "tls.crt") || ck.KeyFile != filepath.Join(dir, "tls.key") {
		t.Errorf("serving pair %s %s, want tls.crt and tls.key of %s", ck.CertFile, ck.KeyFile, dir)
	}
	if ca, err := o.caBundle(nil); err != nil || string(ca) != "CA" {
		t.Errorf("CA bundle %q, %v; want ca.crt's content", ca, err)
	}
}

func TestOverrideReachesDelegatedAuth(t *testing.T) {
	o := NewOptions()
	o.KubeAPIServerOverride = "https://10.0.0.1:6443"
	if err := o.completeServing(); err != nil {
		t.Fatal(err)
	}
	for name, wrap := range map[string]func(http.RoundTripper) http.RoundTripper{
		"authentication": o.APIServer.Authentication.CustomRoundTripperFn,
		"authorization":  o.APIServer.Authorization.CustomRoundTripperFn,
	} {
		if wrap == nil {
			t.Errorf("delegated %s does not go to kubeAPIServerOverride", name)
		}
	}
}

func TestFeatureGatesOfTheConfigFileTurnTheExternalIPControllersOnAndOff(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if !o.EnableEgress || o.EnableServiceExternalIP {
		t.Errorf("defaults: Egress %v, ServiceExternalIP %v; want upstream's true and false", o.EnableEgress, o.EnableServiceExternalIP)
	}
	o, err = parse(t, "--config", writeConf(t, "featureGates:\n  Egress: false\n  ServiceExternalIP: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.EnableEgress || !o.EnableServiceExternalIP {
		t.Errorf("from the file: Egress %v, ServiceExternalIP %v; want false and true", o.EnableEgress, o.EnableServiceExternalIP)
	}
}

func TestTheSupportBundleCollectionGateIsOffByDefaultAndReadFromTheFile(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.EnableSupportBundleCollection {
		t.Error("SupportBundleCollection is on by default; upstream's alpha is off")
	}
	o, err = parse(t, "--config", writeConf(t, "featureGates:\n  SupportBundleCollection: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !o.EnableSupportBundleCollection {
		t.Error("featureGates.SupportBundleCollection: true in the file left it off")
	}
}

func TestTheL7NetworkPolicyGateIsOffByDefaultAndReadFromTheFile(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.EnableL7NetworkPolicy {
		t.Error("L7NetworkPolicy is on by default; upstream's alpha is off")
	}
	o, err = parse(t, "--config", writeConf(t, "featureGates:\n  L7NetworkPolicy: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !o.EnableL7NetworkPolicy {
		t.Error("featureGates.L7NetworkPolicy: true in the file left it off")
	}
}
