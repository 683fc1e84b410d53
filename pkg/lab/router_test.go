package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BIRD itself parses the router's configuration (bird -p: parse and exit).
func TestRouterConfigIsOneBIRDAccepts(t *testing.T) {
	bird, err := exec.LookPath("bird")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/bird"); serr != nil {
			t.Skip("no bird (Debian's bird2; hack/install.sh installs it)")
		}
		bird = "/usr/sbin/bird"
	}
	conf := filepath.Join(t.TempDir(), "bird.conf")
	c := routerConfig(3)
	if err := os.WriteFile(conf, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bird, "-p", "-c", conf).CombinedOutput(); err != nil {
		t.Fatalf("bird refuses the configuration: %v: %s\n%s", err, out, c)
	}
	for _, want := range []string{"router id " + RouterIP().String(), "as 65000", "neighbor range 172.30.0.0/24 as 64512", "export none",
		"local 172.30.1.1 as 65000", "neighbor range 172.30.1.0/24 as 64512", "neighbor range 172.30.2.0/24 as 64512"} {
		if !strings.Contains(c, want) {
			t.Errorf("the configuration lacks %q:\n%s", want, c)
		}
	}
}
