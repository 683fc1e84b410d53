package app

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/util/kernelconfig"
)

// A kernel for the check: its config.gz with the given lines.
func kernelWith(t *testing.T, config string) kernelconfig.Paths {
	t.Helper()
	dir := t.TempDir()
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	_, _ = z.Write([]byte(config))
	_ = z.Close()
	if err := os.WriteFile(filepath.Join(dir, "config.gz"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return kernelconfig.Paths{Config: filepath.Join(dir, "config.gz"), SysModule: filepath.Join(dir, "sys"), Modules: filepath.Join(dir, "mods")}
}

// The agent refuses at start the encryption modes it cannot run, naming
// the key and the reason: ipsec on a kernel without ESP says so with the
// evidence; with ESP, that ipsec is only designed. wireGuard runs, also on a
// kernel without WireGuard (wireguard-go then).
func TestTheAgentRefusesEncryptionItCannotRun(t *testing.T) {
	noESP := kernelWith(t, "CONFIG_XFRM=y\n# CONFIG_INET_ESP is not set\n")
	withESP := kernelWith(t, "CONFIG_XFRM=y\nCONFIG_INET_ESP=m\n")
	for _, tc := range []struct {
		name, mode string
		kernel     kernelconfig.Paths
		want       []string // "" for no error
	}{
		{"none runs", "none", noESP, nil},
		{"ipsec without ESP", "ipsec", noESP, []string{"trafficEncryptionMode: ipsec", "CONFIG_INET_ESP", "does not have", "CONFIG_INET_ESP is not set"}},
		{"ipsec with ESP", "ipsec", withESP, []string{"trafficEncryptionMode: ipsec", "not built", "CONFIG_INET_ESP=m"}},
		{"wireGuard runs on a kernel without WireGuard", "wireGuard", kernelWith(t, "CONFIG_TUN=y\n# CONFIG_WIREGUARD is not set\n"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEncryption(tc.mode, tc.kernel)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
