// Package packetcapture is the agent's side of PacketCapture
// (crd.antrea.io/v1alpha1, docs/packetcapture.md). The agent of the capture
// point's Node (the source Pod's, or the destination Pod's when the source
// is not a Pod or spec.capturePoint says Destination) captures; every other
// agent ignores the object. It resolves both ends to addresses, installs
// the capture's flows (pkg/agent/openflow, packet_capture.go: a copy of each
// matching packet sent to the agent as it enters the bridge, through a
// meter, the packet itself forwarded as before), writes each packet-in of
// the capture into a pcapng file (pcapng.go) until spec.captureConfig.firstN
// packets are in or spec.timeout passes, then removes the flows and reports
// the status: numberCaptured, filePath (<agent pod>:<path>) and the
// PacketCaptureStarted and PacketCaptureComplete conditions. The agent API
// serves the file (Handler; antctl packetcapture ... -o file.pcapng).
//
// One capture runs at a time per object; a capture interrupted by an agent
// restart is reported Complete with reason Interrupted (its flows time out
// in the switch). A capture with spec.fileServer is then uploaded there
// (pkg/util/fileserver, SFTP) as NAME.pcapng with the username and password
// of the Secret antrea-packetcapture-fileserver-auth in the agent's
// Namespace (upstream's); the PacketCaptureFileUploaded condition and, on
// failure, a Warning Event say how it went, and the file is also kept on the
// agent.
package packetcapture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/util/fileserver"
	"antrea.io/antrea/pkg/util/namequeue"
)

// AuthSecretName is the Secret, in the agent's Namespace, with the username
// and password of the file servers (upstream's name and keys).
const AuthSecretName = "antrea-packetcapture-fileserver-auth"

// UploadTimeout bounds one upload.
const UploadTimeout = 2 * time.Minute

// DefaultTimeout is a capture's timeout when spec.timeout is unset (upstream's).
const DefaultTimeout = 60 * time.Second

// DefaultDir is where the agent keeps the capture files.
const DefaultDir = "/tmp/antrea/packetcapture"

// Flows is what the agent's OpenFlow client does for PacketCapture.
type Flows interface {
	InstallPacketCaptureFlows(ctx context.Context, spec agentof.PacketCaptureFlows) error
	UninstallPacketCaptureFlows(ctx context.Context, id uint8) error
}

// Config is what the controller needs.
type Config struct {
	NodeName string
	// PodName is the agent's Pod name, the host part of status.filePath
	// (the Node name when empty).
	PodName string
	// Dir holds the files (DefaultDir when empty).
	Dir string
	// Client writes the PacketCaptures' status; Kube reads the Pods that
	// are not on this Node.
	Client   versioned.Interface
	Kube     kubernetes.Interface
	Informer crdinformers.PacketCaptureInformer
	Flows    Flows
	// IO is where the controller registers its handler of the packet-ins
	// of kind PacketInCapture.
	IO         agentof.PacketInRouter
	Interfaces interfacestore.InterfaceStore
	// Namespace is the agent's, where AuthSecretName is read (kube-system
	// when empty).
	Namespace string
	// Recorder posts the Warning Events of failed uploads (may be nil).
	Recorder record.EventRecorder
	// Upload sends a file to a file server (fileserver.Upload when nil).
	Upload func(ctx context.Context, s fileserver.Server, name string, content io.Reader) error
	// Datapath flushes ovs-vswitchd's cached datapath flows (may be nil):
	// a megaflow cached before the capture's flows would forward matching
	// packets past them until a revalidator re-translates it (pkg/agent/dpcache).
	Datapath DatapathCache
}

// DatapathCache is ovs-vswitchd's datapath flow cache (a *dpcache.Purger).
type DatapathCache interface {
	Sync(ctx context.Context) error
}

// capture is a capture this agent runs.
type capture struct {
	name string
	uid  types.UID
	id   uint8
	want int32
	path string

	// Under the Controller's mu: the file, the count, done once closed.
	w      *pcapngWriter
	f      *os.File
	count  int32
	werr   error
	full   chan struct{} // closed when count reaches want
	cancel context.CancelFunc
	ended  chan struct{} // closed when the capture's goroutine returned
}

// Controller runs the captures whose capture point is on this Node.
type Controller struct {
	cfg    Config
	lister crdlisters.PacketCaptureLister
	synced cache.InformerSynced
	queue  *namequeue.Queue

	mu     sync.Mutex
	byName map[string]*capture
	byID   map[uint8]*capture
	// done names the captures this agent completed (not run again).
	done map[types.UID]bool
	wg   sync.WaitGroup
}

// NewController makes the controller; Run starts it.
func NewController(cfg Config) *Controller {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	if cfg.PodName == "" {
		cfg.PodName = cfg.NodeName
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "kube-system"
	}
	if cfg.Upload == nil {
		cfg.Upload = fileserver.Upload
	}
	c := &Controller{
		cfg:    cfg,
		lister: cfg.Informer.Lister(),
		synced: cfg.Informer.Informer().HasSynced,
		byName: map[string]*capture{},
		byID:   map[uint8]*capture{},
		done:   map[types.UID]bool{},
	}
	c.queue = namequeue.New("PacketCapture", cfg.Informer.Informer(), c.sync)
	return c
}

// Run captures until ctx ends; the captures under way then end (their
// flows removed, their files closed, reported Complete).
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	c.cfg.IO.Handle(agentof.PacketInCapture, c.packetIn)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.queue.Run(ctx)
	c.mu.Lock()
	for _, r := range c.byName {
		r.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Controller) sync(ctx context.Context, name string) error {
	pc, err := c.lister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.mu.Lock()
	r := c.byName[name]
	c.mu.Unlock()
	if pc == nil || (r != nil && r.uid != pc.UID) {
		if r != nil {
			r.cancel()
			<-r.ended
		}
		if pc == nil {
			c.removeFile(name)
			return nil
		}
	} else if r != nil {
		return nil // running
	}
	c.mu.Lock()
	done := c.done[pc.UID]
	c.mu.Unlock()
	if done || conditionTrue(pc, crdv1alpha1.PacketCaptureComplete) {
		return nil
	}
	ep, local, err := c.endpoints(ctx, pc)
	if err != nil || !local {
		return err
	}
	if conditionTrue(pc, crdv1alpha1.PacketCaptureStarted) {
		// Started by this agent before it restarted: what it wrote is lost.
		return c.report(ctx, pc.Name, pc.UID, 0, "", complete("Interrupted", "the agent restarted during the capture"))
	}
	return c.start(ctx, pc, ep)
}

// ends are a capture's resolved ends: the addresses, and the OVS port of
// the capture point's Pod.
type ends struct {
	src, dst netip.Addr
	// port is the capture point Pod's OVS port; srcIsPoint says it is the
	// source.
	port       uint32
	srcIsPoint bool
}

// endpoints resolves both ends; local is false when the capture point is
// not a Pod of this Node.
func (c *Controller) endpoints(ctx context.Context, pc *crdv1alpha1.PacketCapture) (ends, bool, error) {
	s := pc.Spec
	pointIsSrc := s.Source.Pod != nil && s.CapturePoint != crdv1alpha1.CapturePointDestination
	point := s.Destination.Pod
	if pointIsSrc {
		point = s.Source.Pod
	}
	if point == nil {
		return ends{}, false, nil
	}
	ifs := c.cfg.Interfaces.GetContainerInterfacesByPod(point.Name, namespaceOf(point))
	if len(ifs) == 0 || ifs[0].OVSPortConfig == nil {
		return ends{}, false, nil
	}
	e := ends{port: uint32(ifs[0].OVSPortConfig.OFPort), srcIsPoint: pointIsSrc}
	var err error
	if e.src, err = c.address(ctx, s.Source.Pod, s.Source.IP, family(s.Packet)); err != nil {
		return e, true, fmt.Errorf("source: %w", err)
	}
	if e.dst, err = c.address(ctx, s.Destination.Pod, s.Destination.IP, family(s.Packet)); err != nil {
		return e, true, fmt.Errorf("destination: %w", err)
	}
	return e, true, nil
}

func namespaceOf(p *crdv1alpha1.PodReference) string {
	if p.Namespace == "" {
		return "default"
	}
	return p.Namespace
}

func family(p *crdv1alpha1.Packet) corev1.IPFamily {
	if p == nil || p.IPFamily == "" {
		return corev1.IPv4Protocol
	}
	return p.IPFamily
}

// address is a Pod's address of the family (from this Node's interface
// store, or the API for a Pod elsewhere), or the IP; invalid when neither
// is set (any address).
func (c *Controller) address(ctx context.Context, pod *crdv1alpha1.PodReference, ip *string, fam corev1.IPFamily) (netip.Addr, error) {
	want6 := fam == corev1.IPv6Protocol
	pick := func(ips []string) (netip.Addr, bool) {
		for _, s := range ips {
			if a, err := netip.ParseAddr(s); err == nil && a.Unmap().Is6() == want6 {
				return a.Unmap(), true
			}
		}
		return netip.Addr{}, false
	}
	switch {
	case pod != nil:
		var ips []string
		if ifs := c.cfg.Interfaces.GetContainerInterfacesByPod(pod.Name, namespaceOf(pod)); len(ifs) > 0 {
			for _, a := range ifs[0].IPs {
				ips = append(ips, a.String())
			}
		} else if c.cfg.Kube != nil {
			p, err := c.cfg.Kube.CoreV1().Pods(namespaceOf(pod)).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return netip.Addr{}, fmt.Errorf("pod %s/%s: %w", namespaceOf(pod), pod.Name, err)
			}
			for _, a := range p.Status.PodIPs {
				ips = append(ips, a.IP)
			}
		}
		if a, ok := pick(ips); ok {
			return a, nil
		}
		return netip.Addr{}, fmt.Errorf("pod %s/%s has no %s address", namespaceOf(pod), pod.Name, fam)
	case ip != nil:
		a, err := netip.ParseAddr(*ip)
		if err != nil {
			return netip.Addr{}, err
		}
		return a.Unmap(), nil
	}
	return netip.Addr{}, nil
}

// freeIDLocked is an id no running capture has (0: none left). c.mu is held.
func (c *Controller) freeIDLocked() uint8 {
	for id := 1; id <= 255; id++ {
		if c.byID[uint8(id)] == nil {
			return uint8(id)
		}
	}
	return 0
}

// start opens the file, installs the flows and runs the capture until
// firstN packets are in or the timeout.
func (c *Controller) start(ctx context.Context, pc *crdv1alpha1.PacketCapture, e ends) error {
	want := int32(0)
	if fn := pc.Spec.CaptureConfig.FirstN; fn != nil {
		want = fn.Number
	}
	timeout := DefaultTimeout
	if pc.Spec.Timeout != nil && *pc.Spec.Timeout > 0 {
		timeout = time.Duration(*pc.Spec.Timeout) * time.Second
	}
	matches, err := Matches(pc.Spec, e.src, e.dst, e.port, e.srcIsPoint)
	if err != nil {
		return c.report(ctx, pc.Name, pc.UID, 0, "", complete("Failed", err.Error()))
	}
	if err := os.MkdirAll(c.cfg.Dir, 0o700); err != nil {
		return err
	}
	path := c.filePath(pc.Name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	w, err := newPcapngWriter(f, fmt.Sprintf("ovs-port-%d", e.port))
	if err != nil {
		f.Close()
		return err
	}
	c.mu.Lock()
	id := c.freeIDLocked()
	if id == 0 {
		c.mu.Unlock()
		f.Close()
		return errors.New("255 packet captures already run on this node")
	}
	runCtx, cancel := context.WithTimeout(context.Background(), timeout)
	r := &capture{name: pc.Name, uid: pc.UID, id: id, want: want, path: path, w: w, f: f,
		full: make(chan struct{}), cancel: cancel, ended: make(chan struct{})}
	c.byName[pc.Name], c.byID[id] = r, r
	c.mu.Unlock()

	if err := c.cfg.Flows.InstallPacketCaptureFlows(ctx, agentof.PacketCaptureFlows{ID: id, Matches: matches, Timeout: timeout}); err != nil {
		cancel()
		c.forget(r)
		f.Close()
		close(r.ended)
		return err
	}
	if c.cfg.Datapath != nil {
		if err := c.cfg.Datapath.Sync(ctx); err != nil {
			klog.ErrorS(err, "Could not flush the datapath flow cache: the first matching packets may be missed", "packetCapture", pc.Name)
		}
	}
	klog.InfoS("Started packet capture", "packetCapture", pc.Name, "id", id, "flows", len(matches), "firstN", want, "timeout", timeout, "file", path)
	if err := c.report(ctx, pc.Name, pc.UID, 0, "", condition(crdv1alpha1.PacketCaptureStarted, metav1.ConditionTrue, "Started", "")); err != nil {
		klog.ErrorS(err, "Could not report the packet capture started", "packetCapture", pc.Name)
	}
	c.wg.Add(1)
	go c.await(runCtx, r)
	return nil
}

// await ends a capture once it is full or its context ends (timeout, agent
// stop, object deleted).
func (c *Controller) await(ctx context.Context, r *capture) {
	defer c.wg.Done()
	defer close(r.ended)
	reason, msg := "Succeed", ""
	select {
	case <-r.full:
	case <-ctx.Done():
		reason, msg = "Timeout", ctx.Err().Error()
		if errors.Is(ctx.Err(), context.Canceled) {
			reason = "Stopped"
		}
	}
	r.cancel()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cfg.Flows.UninstallPacketCaptureFlows(stopCtx, r.id); err != nil {
		klog.ErrorS(err, "Could not remove the packet capture flows", "packetCapture", r.name, "id", r.id)
	}
	c.mu.Lock()
	count, werr := r.count, r.werr
	if err := r.w.Flush(); err != nil && werr == nil {
		werr = err
	}
	if err := r.f.Close(); err != nil && werr == nil {
		werr = err
	}
	r.w = nil
	c.mu.Unlock()
	c.forget(r)
	if werr != nil {
		reason, msg = "WriteFailed", werr.Error()
	}
	klog.InfoS("Packet capture complete", "packetCapture", r.name, "captured", count, "reason", reason, "file", r.path)
	conds := []crdv1alpha1.PacketCaptureCondition{complete(reason, msg)}
	path := c.cfg.PodName + ":" + r.path
	if pc, err := c.lister.Get(r.name); err == nil && pc.UID == r.uid && pc.Spec.FileServer != nil && werr == nil {
		upCtx, cancel := context.WithTimeout(context.Background(), UploadTimeout)
		cond, url := c.upload(upCtx, pc, r.path)
		cancel()
		conds = append(conds, cond)
		if url != "" {
			path = url
		}
	}
	if err := c.report(stopCtx, r.name, r.uid, count, path, conds...); err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Could not report the packet capture complete", "packetCapture", r.name)
	}
	c.mu.Lock()
	c.done[r.uid] = true
	c.mu.Unlock()
}

// upload sends the capture's file to spec.fileServer; the condition says
// how it went, and url is where the file is when it went well.
func (c *Controller) upload(ctx context.Context, pc *crdv1alpha1.PacketCapture, file string) (_ crdv1alpha1.PacketCaptureCondition, url string) {
	fs := pc.Spec.FileServer
	name := pc.Name + ".pcapng"
	failed := func(reason string, err error) (crdv1alpha1.PacketCaptureCondition, string) {
		msg := fmt.Sprintf("the file is kept on the agent: %v", err)
		klog.ErrorS(err, "Could not upload the packet capture", "packetCapture", pc.Name, "reason", reason)
		if c.cfg.Recorder != nil {
			c.cfg.Recorder.Event(pc, corev1.EventTypeWarning, "FileUploadFailed", msg)
		}
		return condition(crdv1alpha1.PacketCaptureFileUploaded, metav1.ConditionFalse, reason, msg), ""
	}
	secret, err := c.cfg.Kube.CoreV1().Secrets(c.cfg.Namespace).Get(ctx, AuthSecretName, metav1.GetOptions{})
	if err != nil {
		return failed("NoCredentials", fmt.Errorf("read the Secret %s/%s: %w", c.cfg.Namespace, AuthSecretName, err))
	}
	server, err := fileserver.ServerFromSecret(fs.URL, fs.HostPublicKey, secret)
	if err != nil {
		return failed("NoCredentials", err)
	}
	f, err := os.Open(file)
	if err != nil {
		return failed("UploadFailed", err)
	}
	defer f.Close()
	if err := c.cfg.Upload(ctx, server, name, f); err != nil {
		reason := "UploadFailed"
		switch {
		case errors.Is(err, fileserver.ErrAuthentication):
			reason = "AuthenticationFailed"
		case errors.Is(err, fileserver.ErrHostKey):
			reason = "HostKeyMismatch"
		}
		return failed(reason, err)
	}
	url = strings.TrimSuffix(fs.URL, "/") + "/" + name
	klog.InfoS("Uploaded the packet capture", "packetCapture", pc.Name, "url", url)
	return condition(crdv1alpha1.PacketCaptureFileUploaded, metav1.ConditionTrue, "Succeed", ""), url
}

// forget drops a capture from the running ones.
func (c *Controller) forget(r *capture) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName[r.name] == r {
		delete(c.byName, r.name)
	}
	if c.byID[r.id] == r {
		delete(c.byID, r.id)
	}
}

// packetIn writes a captured packet into its capture's file (the
// dispatcher calls it from one goroutine).
func (c *Controller) packetIn(_ context.Context, pi *binding.PacketIn) {
	id, ok := agentof.PacketCaptureID(pi)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.byID[id]
	if r == nil || r.w == nil || (r.want > 0 && r.count >= r.want) {
		return
	}
	full := int(pi.FullLen)
	if full == 0 {
		full = len(pi.Data)
	}
	if err := r.w.WritePacket(now, pi.Data, full); err != nil {
		if r.werr == nil {
			r.werr = err
		}
		r.cancel()
		return
	}
	r.count++
	if r.want > 0 && r.count == r.want {
		close(r.full)
	}
}

// filePath is where a capture's file is kept.
func (c *Controller) filePath(name string) string { return filepath.Join(c.cfg.Dir, name+".pcapng") }

// removeFile removes a deleted capture's file.
func (c *Controller) removeFile(name string) {
	if err := os.Remove(c.filePath(name)); err != nil && !os.IsNotExist(err) {
		klog.ErrorS(err, "Could not remove a packet capture file", "packetCapture", name)
	}
}

// File opens the file of a capture this agent completed (for the agent API).
func (c *Controller) File(name string) (*os.File, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return nil, os.ErrNotExist
	}
	c.mu.Lock()
	_, running := c.byName[name]
	c.mu.Unlock()
	if running {
		return nil, errRunning
	}
	return os.Open(c.filePath(name))
}

var errRunning = errors.New("the capture is still running")

func condition(t crdv1alpha1.PacketCaptureConditionType, s metav1.ConditionStatus, reason, msg string) crdv1alpha1.PacketCaptureCondition {
	return crdv1alpha1.PacketCaptureCondition{Type: t, Status: s, LastTransitionTime: metav1.Now(), Reason: reason, Message: msg}
}

func complete(reason, msg string) crdv1alpha1.PacketCaptureCondition {
	return condition(crdv1alpha1.PacketCaptureComplete, metav1.ConditionTrue, reason, msg)
}

func conditionTrue(pc *crdv1alpha1.PacketCapture, t crdv1alpha1.PacketCaptureConditionType) bool {
	for _, cd := range pc.Status.Conditions {
		if cd.Type == t {
			return cd.Status == metav1.ConditionTrue
		}
	}
	return false
}

// report writes the status: the count and path when given, and the
// conditions (replacing those of the same type), retried on conflict.
func (c *Controller) report(ctx context.Context, name string, uid types.UID, count int32, path string, conds ...crdv1alpha1.PacketCaptureCondition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pc, err := c.cfg.Client.CrdV1alpha1().PacketCaptures().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pc.UID != uid {
			return nil
		}
		pc = pc.DeepCopy()
		if count > 0 {
			pc.Status.NumberCaptured = count
		}
		if path != "" {
			pc.Status.FilePath = path
		}
		for _, cd := range conds {
			replaced := false
			for i := range pc.Status.Conditions {
				if pc.Status.Conditions[i].Type == cd.Type {
					pc.Status.Conditions[i], replaced = cd, true
				}
			}
			if !replaced {
				pc.Status.Conditions = append(pc.Status.Conditions, cd)
			}
		}
		_, err = c.cfg.Client.CrdV1alpha1().PacketCaptures().UpdateStatus(ctx, pc, metav1.UpdateOptions{})
		return err
	})
}

// Matches are the flows' alternatives of a spec between src and dst:
// one per direction times each ICMP message or TCP flags matcher. A packet
// leaving the capture point's Pod is matched at its port.
func Matches(s crdv1alpha1.PacketCaptureSpec, src, dst netip.Addr, port uint32, srcIsPoint bool) ([]agentof.PacketCaptureMatch, error) {
	base := agentof.PacketCaptureMatch{IPv6: family(s.Packet) == corev1.IPv6Protocol}
	var alts []agentof.PacketCaptureMatch
	if p := s.Packet; p != nil {
		proto, err := crdv1alpha1.ProtocolNumber(p.Protocol)
		if err != nil {
			return nil, err
		}
		if proto == binding.IPProtoICMP && base.IPv6 {
			proto = binding.IPProtoICMPv6
		}
		th := p.TransportHeader
		if proto == 0 {
			// A transport header says its protocol.
			switch {
			case th.TCP != nil:
				proto = binding.IPProtoTCP
			case th.UDP != nil:
				proto = binding.IPProtoUDP
			case th.ICMP != nil:
				proto = binding.IPProtoICMP
				if base.IPv6 {
					proto = binding.IPProtoICMPv6
				}
			}
		}
		base.Proto = proto
		switch {
		case th.TCP != nil:
			base.SrcPort, base.DstPort = port16(th.TCP.SrcPort), port16(th.TCP.DstPort)
			for _, fl := range th.TCP.Flags {
				m := base
				m.TCPFlags, m.TCPFlagsMask = uint16(fl.Value), uint16(fl.Value)
				if fl.Mask != nil {
					m.TCPFlagsMask = uint16(*fl.Mask)
				}
				alts = append(alts, m)
			}
		case th.UDP != nil:
			base.SrcPort, base.DstPort = port16(th.UDP.SrcPort), port16(th.UDP.DstPort)
		case th.ICMP != nil:
			for _, msg := range th.ICMP.Messages {
				t, err := crdv1alpha1.ICMPTypeNumber(msg.Type)
				if err != nil {
					return nil, err
				}
				m := base
				m.ICMPType = &t
				if msg.Code != nil {
					code := uint8(*msg.Code)
					m.ICMPCode = &code
				}
				alts = append(alts, m)
			}
		}
	}
	if len(alts) == 0 {
		alts = []agentof.PacketCaptureMatch{base}
	}
	var out []agentof.PacketCaptureMatch
	forward := s.Direction != crdv1alpha1.CaptureDirectionDestinationToSource
	backward := s.Direction == crdv1alpha1.CaptureDirectionDestinationToSource || s.Direction == crdv1alpha1.CaptureDirectionBoth
	for _, a := range alts {
		if forward {
			m := a
			m.Src, m.Dst = src, dst
			if srcIsPoint {
				m.InPort = port
			}
			out = append(out, m)
		}
		if backward {
			m := a
			m.Src, m.Dst = dst, src
			m.SrcPort, m.DstPort = a.DstPort, a.SrcPort
			if !srcIsPoint {
				m.InPort = port
			}
			out = append(out, m)
		}
	}
	return out, nil
}

func port16(p *int32) uint16 {
	if p == nil {
		return 0
	}
	return uint16(*p)
}
