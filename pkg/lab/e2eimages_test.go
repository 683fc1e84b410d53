package lab

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"antrea.io/antrea/pkg/lab/images"
)

// What upstream's e2e specs run in the test images, as the specs say it.
// Each command is a program the specs start in a container of the image:
// through `kubectl exec POD -- /bin/sh -x -c CMD` (test/e2e/framework/pod/
// output RunHostCmd), as a container's command, or inside such a shell
// line. Shell builtins of /bin/sh (echo, test, [, true, cd) are left out:
// the shell has them. Each entry names the file of k8s.io/kubernetes
// v1.37.2 it comes from and a piece of the line that runs it; the test
// checks the piece is still there when that module is in the Go module
// cache (hack/install.sh puts it there), so the table cannot drift from
// the source unseen.
type upstreamCommand struct {
	// command is a program name (looked up in the image's PATH) or an
	// absolute path.
	command string
	// file is relative to test/e2e of k8s.io/kubernetes v1.37.2; snippet
	// is a piece of the line there that runs command.
	file, snippet string
}

const upstreamModule = "k8s.io/kubernetes@v1.37.2"

// agnhostCommands are the programs upstream's e2e runs in agnhost.
var agnhostCommands = []upstreamCommand{
	// Every RunHostCmd is `/bin/sh -x -c CMD`.
	{"/bin/sh", "framework/pod/output/output.go", `"exec", name, "--", "/bin/sh", "-x", "-c", cmd`},
	{"sh", "network/dns_common.go", `[]string{"sh", "-c", probe.cmd}`},
	{"/agnhost", "network/dns.go", `cmd := []string{"/agnhost", arg}`},
	{"/agnhost", "network/proxy.go", `Command: []string{"/agnhost", "porter", "--json-response"}`},
	{"/agnhost-2", "common/node/containers.go", `"/agnhost-2"`},
	// The DNS server of "DNS should support configurable pod resolv.conf".
	{"/coredns", "network/dns_common.go", `pod.Spec.Containers[0].Command = []string{"/coredns"}`},
	// verifyServeHostnameServiceUp: the headless, service-proxy-name,
	// up-and-down and recreated Service specs.
	{"wget", "network/service.go", `wgetCmd := "wget -q -O -"`},
	{"wget", "network/service.go", `cmd := fmt.Sprintf("wget -T 5 -qO- %q", target)`},
	{"seq", "network/service.go", `cmd := fmt.Sprintf("for i in $(seq 1 %d); do %s http://%s 2>&1 || true; echo; done",`},
	{"curl", "network/service.go", `curl := fmt.Sprintf(` + "`" + `curl -q -s --connect-timeout 2 --max-time 60 http://%s/` + "`" + `, serviceIPPort)`},
	{"curl", "framework/network/utils.go", `cmd := fmt.Sprintf("curl -i -q -s --connect-timeout 1 http://localhost:%d%s", port, path)`},
	{"curl", "network/hostport.go", `fmt.Sprintf("curl -g --connect-timeout %v --interface %s http://%s/hostname"`},
	{"nc", "framework/network/utils.go", `cmd = fmt.Sprintf("echo hostName | nc -w 1 -u %s %d", targetIP, targetPort)`},
	{"nc", "network/util.go", `cmd = fmt.Sprintf("echo hostName | nc -v -t -w 2 %s %v", endpoint, port)`},
	{"nc", "network/hostport.go", `fmt.Sprintf("echo hostname | nc -u -w %v %s %d", timeout, hostIP, port)`},
	{"nc", "network/conntrack.go", `nc -w "$TIMEOUT" -W 1 -u -p %d "$TARGET_IP" "$TARGET_PORT"`},
	{"tr", "network/conntrack.go", `2>/dev/null | tr -d '\r\n')`},
	{"date", "network/conntrack.go", `TIMESTAMP=$(date '+%%H:%%M:%%S')`},
	{"sleep", "network/service.go", `"sleep 10; dd if=/dev/urandom of=file bs=1M count=10; sleep 10000"`},
	{"dd", "network/service.go", `"sleep 10; dd if=/dev/urandom of=file bs=1M count=10; sleep 10000"`},
	{"ss", "network/service.go", "cmd := fmt.Sprintf(`! ss -ant46 'sport = :%d' | tail -n +2 | grep LISTEN`, nodePort)"},
	{"tail", "network/service.go", "cmd := fmt.Sprintf(`! ss -ant46 'sport = :%d' | tail -n +2 | grep LISTEN`, nodePort)"},
	{"grep", "network/service.go", "cmd := fmt.Sprintf(`! ss -ant46 'sport = :%d' | tail -n +2 | grep LISTEN`, nodePort)"},
	{"dig", "network/dns_common.go", `cmd := []string{"dig", "+short"}`},
	{"dig", "network/dns_common.go", `check="$$(dig +notcp +noall +answer +search %s)"`},
	{"dig", "network/dns.go", `cmd = []string{"dig", "+short", "+search", testDNSNameShort}`},
	{"getent", "network/dns_common.go", "hostEntryCmd := `test -n \"$$(getent hosts %s)\" && echo OK > /results/%s;`"},
	{"cat", "network/dns.go", `cmd := []string{"cat", "/etc/resolv.conf"}`},
	{"hostname", "network/dns.go", `RunHostCmd(testAgnhostPod.Namespace, testAgnhostPod.Name, "hostname")`},
	{"nslookup", "framework/service/jig.go", `cmd := fmt.Sprintf("nslookup %s", svcName)`},
	{"iperf", "network/networking_perf.go", `e2epod.ExecShellInPod(ctx, f, podName, "iperf -v || true")`},
}

// busyboxCommands are the programs upstream's e2e runs in the busybox
// image, in the [sig-network] specs (the Conntrack ones).
var busyboxCommands = []upstreamCommand{
	{"/bin/sh", "network/conntrack.go", `Command: []string{"/bin/sh", "-c", "echo Pausing start. && sleep 15"}`},
	{"sleep", "network/conntrack.go", `Command: []string{"/bin/sh", "-c", "echo Pausing start. && sleep 15"}`},
	{"sh", "network/conntrack.go", `"sh", "-c", "while true; do sleep 2; nc boom-server 9000& done"`},
	{"nc", "network/conntrack.go", `"sh", "-c", "while true; do sleep 2; nc boom-server 9000& done"`},
}

// TestE2EImagesHoldWhatUpstreamE2ERuns builds the lab's upstream test
// images from the inputs hack/install.sh made (this checkout's _output, the
// shared cache) into a temporary store and checks that every program
// upstream's e2e specs run in them is there: a regular executable file the
// image's PATH finds, through the image's symlinks.
func TestE2EImagesHoldWhatUpstreamE2ERuns(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checkUpstreamCitations(t, append(slices.Clone(agnhostCommands), busyboxCommands...))

	opts := Options{
		BinDir:     filepath.Join(repo, "bin"),
		KubeBinDir: filepath.Join(repo, "_output", "bin"),
		CNIBinDir:  filepath.Join(repo, "_output", "cni", "bin"),
	}
	specs, err := opts.imageSpecs()
	if err != nil {
		t.Skipf("the images' inputs are missing (hack/install.sh): %v", err)
	}
	store, err := images.NewStore(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, name string) *imageFS {
		t.Helper()
		i := slices.IndexFunc(specs, func(s images.Spec) bool { return slices.Contains(s.Names, name) })
		if i < 0 {
			t.Fatalf("the lab builds no image %s", name)
		}
		for _, f := range specs[i].Files {
			if _, err := os.Stat(f.Source); f.Source != "" && err != nil {
				t.Skipf("an input of %s is missing (hack/install.sh): %v", name, err)
			}
		}
		start := time.Now()
		if err := store.Ensure(specs[i], "test"); err != nil {
			t.Fatal(err)
		}
		if size, err := imageSize(store, name); err == nil {
			t.Logf("%s: %.1f MB, built in %v", name, float64(size)/1e6, time.Since(start).Round(time.Millisecond))
		}
		img, err := store.Image(name)
		if err != nil {
			t.Fatal(err)
		}
		return readImageFS(t, img)
	}

	for _, tc := range []struct {
		image    string
		commands []upstreamCommand
	}{
		{AgnhostImage, agnhostCommands},
		{BusyBoxImage, busyboxCommands},
		// As test/images/*/Dockerfile run them: their entrypoints.
		{RegressionIssue74839Image, []upstreamCommand{{command: "/regression-issue-74839"}}},
		{NginxImage, []upstreamCommand{{command: "nginx"}}},
	} {
		t.Run(tc.image, func(t *testing.T) {
			fsys := build(t, tc.image)
			checked := map[string]bool{}
			for _, c := range tc.commands {
				if checked[c.command] {
					continue
				}
				checked[c.command] = true
				if where, err := fsys.lookPath(c.command); err != nil {
					t.Errorf("%s lacks %s, which upstream's %s runs (%s): %v", tc.image, c.command, c.file, c.snippet, err)
				} else {
					t.Logf("%s: %s is /%s", tc.image, c.command, where)
				}
			}
		})
	}
}

// The Corefile "DNS should support configurable pod resolv.conf" gives the
// agnhost image's /coredns (test/e2e/network/dns_common.go,
// generateCoreDNSConfigmap) uses these plugins; the lab's CoreDNS is built
// with a chosen few (hack/install.sh COREDNS_PLUGINS).
var upstreamCorefilePlugins = []upstreamCommand{
	{"hosts", "network/dns_common.go", "corefileData := fmt.Sprintf(`. {\n\thosts {%s"},
	{"log", "network/dns_common.go", "\tlog\n}`, entries)"},
}

func TestAgnhostsCoreDNSHasThePluginsOfUpstreamsTestCorefile(t *testing.T) {
	checkUpstreamCitations(t, upstreamCorefilePlugins)
	bin := filepath.Join("..", "..", "_output", "bin", "coredns")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no CoreDNS binary (hack/install.sh coredns): %v", err)
	}
	out, err := exec.Command(bin, "-plugins").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -plugins: %v\n%s", bin, err, out)
	}
	have := strings.Fields(string(out))
	for _, p := range upstreamCorefilePlugins {
		if !slices.Contains(have, p.command) {
			t.Errorf("CoreDNS lacks plugin %s, which upstream's test Corefile uses (%s): it has %q", p.command, p.file, have)
		}
	}
}

// checkUpstreamCitations checks that each command's snippet is in its file
// of k8s.io/kubernetes v1.37.2, when the module is in the Go module cache.
func checkUpstreamCitations(t *testing.T, commands []upstreamCommand) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Logf("no Go module cache (%v): the table's citations are not checked", err)
		return
	}
	root := filepath.Join(strings.TrimSpace(string(out)), upstreamModule, "test", "e2e")
	if _, err := os.Stat(root); err != nil {
		t.Logf("%s is not in the module cache (hack/install.sh kube puts it there): the table's citations are not checked", upstreamModule)
		return
	}
	for _, c := range commands {
		b, err := os.ReadFile(filepath.Join(root, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.command, err)
			continue
		}
		if !strings.Contains(string(b), c.snippet) {
			t.Errorf("upstream's test/e2e/%s no longer holds %s for %s: update the table", c.file, c.snippet, c.command)
		}
	}
}

// imageFS is the file tree of an image, its layers applied in order: each
// path (relative, cleaned) with its tar header.
type imageFS struct {
	entries map[string]*tar.Header
	path    []string // the image's PATH
}

func readImageFS(t *testing.T, img v1.Image) *imageFS {
	t.Helper()
	fsys := &imageFS{entries: map[string]*tar.Header{}}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cf.Config.Env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			fsys.path = strings.Split(p, ":")
		}
	}
	for _, l := range layers(t, img) {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
			dir, base := path.Split(name)
			if wh, ok := strings.CutPrefix(base, ".wh."); ok { // an OCI whiteout
				delete(fsys.entries, path.Join(dir, wh))
				continue
			}
			fsys.entries[name] = hdr
		}
		rc.Close()
	}
	return fsys
}

// resolve follows p's symlinks (in every component, as the kernel does)
// and returns the path and header of what p names.
func (f *imageFS) resolve(p string) (string, *tar.Header, error) {
	parts := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	cur := ""
	for hops := 0; len(parts) > 0; {
		next := path.Join(cur, parts[0])
		parts = parts[1:]
		hdr, ok := f.entries[next]
		if !ok {
			return "", nil, errors.New("/" + next + " does not exist")
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			if hops++; hops > 40 {
				return "", nil, errors.New("too many symlinks at /" + next)
			}
			target := hdr.Linkname
			if !path.IsAbs(target) {
				target = path.Join("/", cur, target)
			}
			rest := strings.Split(strings.TrimPrefix(path.Clean(target), "/"), "/")
			if target == "/" {
				rest = nil
			}
			parts = append(rest, parts...)
			cur = ""
		case tar.TypeLink:
			// A hardlink names the first entry of its inode.
			hdr, ok = f.entries[strings.TrimPrefix(path.Clean("/"+hdr.Linkname), "/")]
			if !ok {
				return "", nil, errors.New("/" + next + " is a hardlink to a missing file")
			}
			cur = next
			if len(parts) == 0 {
				return cur, hdr, nil
			}
		default:
			cur = next
			if len(parts) == 0 {
				return cur, hdr, nil
			}
		}
	}
	return cur, f.entries[cur], nil
}

// lookPath finds command as a shell would: an absolute path as is, a name
// in each directory of the image's PATH; it must be an executable file.
func (f *imageFS) lookPath(command string) (string, error) {
	candidates := []string{command}
	if !path.IsAbs(command) {
		candidates = nil
		for _, dir := range f.path {
			candidates = append(candidates, path.Join(dir, command))
		}
	}
	var errs []error
	for _, c := range candidates {
		where, hdr, err := f.resolve(c)
		switch {
		case err != nil:
			errs = append(errs, err)
		case hdr.Typeflag != tar.TypeReg:
			errs = append(errs, errors.New(c+" is not a regular file"))
		case hdr.Mode&0o111 == 0:
			errs = append(errs, errors.New(c+" is not executable"))
		default:
			return where, nil
		}
	}
	if len(errs) == 0 {
		return "", errors.New("the image has no PATH")
	}
	return "", errors.Join(errs...)
}
