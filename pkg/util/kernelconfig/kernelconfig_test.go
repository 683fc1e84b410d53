package kernelconfig

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	_, _ = z.Write([]byte(text))
	_ = z.Close()
	p := filepath.Join(dir, "config.gz")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHasReadsTheConfigThenTheModules(t *testing.T) {
	dir := t.TempDir()
	sys, mods := filepath.Join(dir, "sys"), filepath.Join(dir, "mods")
	for _, d := range []string{sys, mods} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, config string
		want         bool
		evidence     string
	}{
		{"built in", "CONFIG_XFRM=y\nCONFIG_INET_ESP=y\n", true, "CONFIG_INET_ESP=y"},
		{"a module", "CONFIG_INET_ESP=m\n", true, "CONFIG_INET_ESP=m"},
		{"not set", "CONFIG_XFRM=y\n# CONFIG_INET_ESP is not set\n", false, "CONFIG_INET_ESP is not set"},
		{"absent", "CONFIG_XFRM=y\nCONFIG_INET_ESP_OFFLOAD=y\n", false, "not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Paths{Config: writeConfig(t, t.TempDir(), tc.config), SysModule: sys, Modules: mods}
			a, err := p.Has("CONFIG_INET_ESP", "esp4")
			if err != nil || a.Has != tc.want || !strings.Contains(a.Evidence, tc.evidence) {
				t.Errorf("got %+v, %v; want has=%v with evidence %q", a, err, tc.want, tc.evidence)
			}
		})
	}
	// No config: the modules decide.
	p := Paths{Config: filepath.Join(dir, "none.gz"), SysModule: sys, Modules: mods}
	if _, err := p.Has("CONFIG_INET_ESP", "esp4"); !errors.Is(err, ErrUnknown) {
		t.Errorf("nothing to read: %v, want ErrUnknown", err)
	}
	if err := os.WriteFile(filepath.Join(mods, "modules.dep"), []byte("kernel/net/ipv4/ah4.ko.xz: kernel/net/xfrm/xfrm_algo.ko.xz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := p.Has("CONFIG_INET_ESP", "esp4"); err != nil || a.Has {
		t.Errorf("modules.dep without esp4: %+v, %v", a, err)
	}
	if err := os.WriteFile(filepath.Join(mods, "modules.dep"), []byte("kernel/net/ipv4/esp4.ko.xz: kernel/net/xfrm/xfrm_algo.ko.xz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err := p.Has("CONFIG_INET_ESP", "esp4"); err != nil || !a.Has {
		t.Errorf("modules.dep with esp4: %+v, %v", a, err)
	}
	if err := os.Mkdir(filepath.Join(sys, "esp4"), 0o755); err != nil {
		t.Fatal(err)
	}
	if a, err := p.Has("CONFIG_INET_ESP", "esp4"); err != nil || !a.Has || !strings.Contains(a.Evidence, "sys/esp4") {
		t.Errorf("/sys/module/esp4: %+v, %v", a, err)
	}
}
