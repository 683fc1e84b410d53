package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/lab/images"
)

// The lab's images: built here from files this machine holds (no Docker, no
// pull from the Internet), kept in an image store outside the checkout, and
// served by a registry on the control plane's underlay address that every
// node's containerd uses as the mirror of registry.k8s.io, docker.io, quay.io
// and ghcr.io. A pod's `image:` therefore resolves as on any cluster, and an
// image the store lacks fails the pod with the usual ErrImagePull.

// Image names the lab builds. The agnhost tags are those upstream's suites
// ask for: e2e.test v1.37.2 (2.66.1 and older pins of some specs) and the SIG
// network-policy-api conformance suite (2.45).
var (
	AgnhostImages = []string{
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1",
		"registry.k8s.io/e2e-test-images/agnhost:2.55",
		"registry.k8s.io/e2e-test-images/agnhost:2.53",
		"registry.k8s.io/e2e-test-images/agnhost:2.45",
	}
	// TestPodImage runs antrea-testpod serve (TCP and UDP 80 and 81,
	// answering with the pod's name); its entrypoint is antrea-testpod, so
	// args ["serve", "--tcp", "8080"] or ["connect", ...] select a mode.
	TestPodImage = "docker.io/antrea/antrea-testpod:latest"
	pauseImages  = []string{SandboxImage}
)

// Upstream's test images besides agnhost that e2e.test v1.37.2's
// [sig-network] specs run (test/utils/image/manifest.go names their tags).
const (
	// BusyBoxImage is the init and client container of the Conntrack specs
	// (test/e2e/network/conntrack.go); upstream's is the busybox image.
	BusyBoxImage = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	// NginxImage runs the pods of the Endpoints and EndpointSlice
	// conformance specs (test/e2e/network/endpoints.go, endpointslice.go).
	NginxImage = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	// RegressionIssue74839Image is the server of Conntrack's "invalid
	// conntrack state bug" spec: it answers a TCP handshake with an
	// out-of-window packet (test/images/regression-issue-74839).
	RegressionIssue74839Image = "registry.k8s.io/e2e-test-images/regression-issue-74839:1.5"
)

// Antrea's own images, under the names build/yamls/antrea.yml uses.
const (
	// AgentImage runs the antrea-agent DaemonSet's three containers:
	// install-cni (install_cni), antrea-agent and antrea-ovs (start_ovs).
	AgentImage = "docker.io/antrea/antrea-agent:latest"
	// ControllerImage runs the antrea-controller Deployment.
	ControllerImage = "docker.io/antrea/antrea-controller:latest"
	// FlowAggregatorImage runs the flow-aggregator Deployment
	// (build/yamls/flow-aggregator.yml, `antrea-lab up --flow-visibility`).
	FlowAggregatorImage = "docker.io/antrea/flow-aggregator:latest"
	// UIImage runs the antrea-ui Deployment (build/yamls/antrea-ui.yml,
	// `antrea-lab up --ui`).
	UIImage = "docker.io/antrea/antrea-ui:latest"
)

// AgnhostImage is the agnhost image of e2e.test v1.37.2.
var AgnhostImage = AgnhostImages[0]

// ImageStoreDir is the default image store: the versioned cache outside the
// checkout (ANTREA_CACHE, else ~/.cache/antrea) that fresh clones share.
func ImageStoreDir() string {
	cache := os.Getenv("ANTREA_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "antrea")
	}
	return filepath.Join(cache, "images")
}

// agnhostRootFS is the Debian rootfs hack/install.sh makes for agnhost.
func (o Options) agnhostRootFS() string {
	return filepath.Join(filepath.Dir(o.KubeBinDir), "rootfs-agnhost")
}

// testRootFS is the rootfs hack/install.sh makes for the upstream test
// image name (its build_test_rootfses: busybox, nginx).
func (o Options) testRootFS(name string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(o.KubeBinDir), "rootfs-"+name))
	if err != nil {
		return "", fmt.Errorf("the %s rootfs is missing (run hack/install.sh test-rootfs): %w", name, err)
	}
	return dir, nil
}

// agentRootFS is the Debian rootfs hack/install.sh makes for antrea-agent
// (its build_agent_rootfs: Open vSwitch, iproute2, iptables, ...).
func (o Options) agentRootFS() string {
	return filepath.Join(filepath.Dir(o.KubeBinDir), "rootfs-antrea-agent")
}

// imageScriptsDir holds the scripts of the antrea-agent image, in the
// checkout whose bin/ holds our binaries.
func (o Options) imageScriptsDir() string {
	return filepath.Join(filepath.Dir(o.BinDir), "build", "images", "scripts")
}

// antreaImageSpecs are Antrea's images, as upstream ships them: the agent's
// on a Debian rootfs with Open vSwitch's userspace daemons and tools, the
// controller's a static binary on an almost empty base. Both take our
// binaries from bin/ (make build), so a rebuild from the same commit gives
// the same digests.
func (o Options) antreaImageSpecs() ([]images.Spec, error) {
	rootfs, err := filepath.EvalSymlinks(o.agentRootFS())
	if err != nil {
		return nil, fmt.Errorf("the antrea-agent rootfs is missing (run hack/install.sh agent-rootfs): %w", err)
	}
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	script := func(name string) string { return filepath.Join(o.imageScriptsDir(), name) }
	return []images.Spec{
		{
			Names:  []string{AgentImage},
			RootFS: rootfs,
			Files: []images.File{
				{Path: "/usr/local/bin/antrea-agent", Source: bin("antrea-agent"), Mode: 0o755},
				{Path: "/usr/local/bin/antrea-cni", Source: bin("antrea-cni"), Mode: 0o755},
				{Path: "/usr/local/bin/antctl", Source: bin("antctl"), Mode: 0o755},
				{Path: "/usr/local/bin/start_ovs", Source: script("start_ovs"), Mode: 0o755},
				{Path: "/usr/local/bin/install_cni", Source: script("install_cni"), Mode: 0o755},
				// The reference loopback plugin, which install_cni puts on
				// nodes that lack one.
				{Path: "/opt/cni", Dir: true},
				{Path: "/opt/cni/bin", Dir: true},
				{Path: "/opt/cni/bin/loopback", Source: filepath.Join(o.CNIBinDir, "loopback"), Mode: 0o755},
			},
			// The manifest names each container's command; alone, the
			// image runs the agent.
			Cmd: []string{"antrea-agent"},
		},
		{
			Names: []string{ControllerImage},
			Files: []images.File{
				{Path: "/usr/local/bin/antrea-controller", Source: bin("antrea-controller"), Mode: 0o755},
				{Path: "/etc/passwd", Content: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
				{Path: "/etc/group", Content: []byte("root:x:0:\nnogroup:x:65534:\n")},
				{Path: "/root", Dir: true, Mode: 0o700},
				{Path: "/tmp", Dir: true, Mode: 0o1777},
				// The default cert-dir of the self-signed serving certificate.
				{Path: "/var/run/antrea", Dir: true},
			},
			Entrypoint: []string{"antrea-controller"},
		},
		{
			// As the controller's: a static binary on an almost empty
			// base; the manifest runs it as user 65532 with /tmp an
			// emptyDir (the flow log).
			Names: []string{FlowAggregatorImage},
			Files: []images.File{
				{Path: "/usr/local/bin/flow-aggregator", Source: bin("flow-aggregator"), Mode: 0o755},
				{Path: "/etc/passwd", Content: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
				{Path: "/etc/group", Content: []byte("root:x:0:\nnonroot:x:65532:\n")},
				{Path: "/tmp", Dir: true, Mode: 0o1777},
			},
			Entrypoint: []string{"flow-aggregator"},
		},
		{
			// antrea-ui embeds its frontend: a static binary on an almost
			// empty base, run as user 65532 with a read-only root.
			Names: []string{UIImage},
			Files: []images.File{
				{Path: "/usr/local/bin/antrea-ui", Source: bin("antrea-ui"), Mode: 0o755},
				{Path: "/etc/passwd", Content: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
				{Path: "/etc/group", Content: []byte("root:x:0:\nnonroot:x:65532:\n")},
				{Path: "/tmp", Dir: true, Mode: 0o1777},
			},
			Entrypoint: []string{"antrea-ui"},
		},
	}, nil
}

// imageSpecs are the images the lab builds, from the binaries and rootfs
// the install and build steps made.
func (o Options) imageSpecs() ([]images.Spec, error) {
	rootfs, err := filepath.EvalSymlinks(o.agnhostRootFS())
	if err != nil {
		return nil, fmt.Errorf("the agnhost rootfs is missing (run hack/install.sh): %w", err)
	}
	antrea, err := o.antreaImageSpecs()
	if err != nil {
		return nil, err
	}
	agentRootFS, err := filepath.EvalSymlinks(o.agentRootFS())
	if err != nil {
		return nil, err
	}
	busybox, err := o.testRootFS("busybox")
	if err != nil {
		return nil, err
	}
	nginx, err := o.testRootFS("nginx")
	if err != nil {
		return nil, err
	}
	kube := func(name string) string { return filepath.Join(o.KubeBinDir, name) }
	return append([]images.Spec{
		{
			// As upstream's test/images/agnhost/Dockerfile: Debian instead of
			// Alpine with the same tools and Alpine's busybox applets (in the
			// rootfs), /agnhost and its agnhost-2 link, /coredns (a DNS
			// spec runs it as its server), porter's certificate, /uploads.
			Names:  AgnhostImages,
			RootFS: rootfs,
			Files: []images.File{
				{Path: "/agnhost", Source: kube("agnhost"), Mode: 0o755},
				{Path: "/agnhost-2", Link: "agnhost"},
				{Path: "/coredns", Source: kube("coredns"), Mode: 0o755},
				{Path: "/localhost.crt", Source: kube("agnhost-localhost.crt"), Mode: 0o644},
				{Path: "/localhost.key", Source: kube("agnhost-localhost.key"), Mode: 0o644},
			},
			Entrypoint:   []string{"/agnhost"},
			Cmd:          []string{"pause"},
			ExposedPorts: []string{"80", "8080", "8081", "9376", "5000"},
		},
		{
			// kube-proxy for `antrea-lab up --proxy kube-proxy`.
			Names:      []string{KubeProxyImage},
			RootFS:     agentRootFS,
			Files:      []images.File{{Path: "/usr/local/bin/kube-proxy", Source: kube("kube-proxy"), Mode: 0o755}},
			Entrypoint: []string{"/usr/local/bin/kube-proxy"},
		},
		{
			// kube-dns: the CoreDNS binary alone, as upstream's image.
			Names:        []string{CoreDNSImage},
			Files:        []images.File{{Path: "/coredns", Source: kube("coredns"), Mode: 0o755}},
			Entrypoint:   []string{"/coredns"},
			ExposedPorts: []string{"53/tcp", "53/udp"},
		},
		{
			// As test/images/glibc-dns-testing/Dockerfile: Debian with dnsutils
			// (the agnhost rootfs has it) and the coredns binary.
			Names:  []string{GlibcDNSTestingImage},
			RootFS: rootfs,
			Files:  []images.File{{Path: "/coredns", Source: kube("coredns"), Mode: 0o755}},
			Cmd:    []string{"/bin/sh"},
		},
		{
			// As test/images/regression-issue-74839/Dockerfile: the program
			// alone (static; upstream adds it to debian-base).
			Names:      []string{RegressionIssue74839Image},
			Files:      []images.File{{Path: "/regression-issue-74839", Source: kube("regression-issue-74839"), Mode: 0o755}},
			Entrypoint: []string{"/regression-issue-74839"},
		},
		{
			// Debian's static busybox with its applets in /bin, as the
			// busybox image upstream's test/images/busybox builds on.
			Names:  []string{BusyBoxImage},
			RootFS: busybox,
			Cmd:    []string{"sh"},
		},
		{
			// Debian's nginx-light instead of the nginx:alpine image of
			// upstream's test/images/nginx, run as that image runs it.
			Names:        []string{NginxImage},
			RootFS:       nginx,
			Cmd:          []string{"nginx", "-e", "stderr", "-g", "daemon off;"},
			ExposedPorts: []string{"80"},
		},
		{
			Names:      pauseImages,
			Files:      []images.File{{Path: "/pause", Source: filepath.Join(o.BinDir, "antrea-pause"), Mode: 0o755}},
			Entrypoint: []string{"/pause"},
		},
		{
			Names:      []string{TestPodImage},
			Files:      []images.File{{Path: "/antrea-testpod", Source: filepath.Join(o.BinDir, "antrea-testpod"), Mode: 0o755}},
			Entrypoint: []string{"/antrea-testpod"},
			Cmd:        []string{"serve"},
		},
	}, antrea...), nil
}

// EnsureImages builds every lab image whose inputs changed since the store
// last built it (seconds for the agnhost image, nothing when unchanged).
func EnsureImages(opts Options) error {
	store, err := images.NewStore(opts.ImageDir)
	if err != nil {
		return err
	}
	specs, err := opts.imageSpecs()
	if err != nil {
		return err
	}
	for _, spec := range specs {
		key, err := inputsKey(spec)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.Names[0], err)
		}
		start := time.Now()
		if err := store.Ensure(spec, key); err != nil {
			return err
		}
		klog.InfoS("Image ready", "image", spec.Names[0], "duration", time.Since(start))
	}
	// Every rebuild leaves the layers of the image it replaced: without
	// this the store grew to 19 GiB over a week of builds and filled the
	// disk under a lab's etcd. An hour spares the blobs of a build or push
	// in flight in another worktree sharing the store.
	freed, err := store.Prune(time.Hour)
	if err != nil {
		return fmt.Errorf("pruning the image store %s: %w", store.Dir(), err)
	}
	if freed > 0 {
		klog.InfoS("Pruned the image store", "dir", store.Dir(), "freedMiB", freed>>20)
	}
	return nil
}

// inputsKey fingerprints the files a spec reads by path, size and mtime
// (the rootfs by its cache path, which names its recipe).
func inputsKey(spec images.Spec) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "rootfs=%s\n", spec.RootFS)
	for _, f := range spec.Files {
		if f.Source == "" {
			continue
		}
		fi, err := os.Stat(f.Source)
		if err != nil {
			return "", fmt.Errorf("%s is missing (run make build and hack/install.sh): %w", f.Source, err)
		}
		fmt.Fprintf(h, "%s %d %d\n", f.Source, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// registryAddr is where the lab registry listens: the control plane's
// underlay address, which every node reaches.
func registryAddr() string {
	return net.JoinHostPort(controlPlaneIP().String(), strconv.Itoa(RegistryPort))
}

// startRegistry serves the image store inside the cp netns.
func (s *supervisor) startRegistry() error {
	store, err := images.NewStore(s.opts.ImageDir)
	if err != nil {
		return err
	}
	h, err := images.NewRegistry(store)
	if err != nil {
		return err
	}
	cp, err := ns.GetNS(netnsPath(ControlPlaneNetNS))
	if err != nil {
		return err
	}
	defer cp.Close()
	var ln net.Listener
	// A socket stays in the netns it was made in.
	if err := cp.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", registryAddr())
		return err
	}); err != nil {
		return fmt.Errorf("listen for the lab registry on %s: %w", registryAddr(), err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.registry = srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Lab registry stopped")
		}
	}()
	klog.InfoS("Lab registry serving", "addr", registryAddr(), "store", store.Dir())
	return nil
}

func (s *supervisor) stopRegistry() {
	if s.registry != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.registry.Shutdown(ctx)
	}
}

// Load adds the images of a tar (`docker save`, crane or go-containerregistry
// tarball, or an OCI layout) to the lab's image store, as `kind load
// image-archive` does; nodes pull them from the lab registry.
func Load(opts Options, path string) ([]string, error) {
	store, err := images.NewStore(opts.ImageDir)
	if err != nil {
		return nil, err
	}
	return images.LoadTarball(store, path)
}

// ListImages prints every image of the store with its manifest digest and
// size (its config and layers, uncompressed as stored and served).
func ListImages(opts Options, out io.Writer) error {
	store, err := images.NewStore(opts.ImageDir)
	if err != nil {
		return err
	}
	imgs, err := store.Images()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(imgs))
	for n := range imgs {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tDIGEST\tSIZE")
	for _, n := range names {
		size := "?"
		if b, err := imageSize(store, n); err == nil && b >= 1e6 {
			size = fmt.Sprintf("%.1f MB", float64(b)/1e6)
		} else if err == nil {
			size = fmt.Sprintf("%.1f kB", float64(b)/1e3)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n, imgs[n], size)
	}
	return tw.Flush()
}

// imageSize is the size of an image's config and layers in bytes.
func imageSize(store *images.Store, name string) (int64, error) {
	img, err := store.Image(name)
	if err != nil {
		return 0, err
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	size := m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}
