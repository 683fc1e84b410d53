// Package cniserver is the agent side of the CNI: a gRPC server on a unix
// socket that the antrea-cni shim calls for every pod. ADD follows seed 001
// (steps 2-8): validate the request, wait (bounded) until the agent is ready,
// take the container's lock, allocate addresses from the IPAM driver, create
// the veth pair into the pod netns, attach the host end to OVS with
// external_ids, read back its OpenFlow port, install the pod's flows and
// record the attachment; a failure at any step runs DEL, so nothing leaks.
// DEL is idempotent, CHECK reports what is missing, STATUS reports readiness
// and GC releases what belongs to attachments the runtime no longer knows.
package cniserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver/ipam"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// External IDs of a pod's OVS port: what a restarted agent needs to know
// about the pod (upstream Antrea uses the same keys).
const (
	ExternalIDAntreaType   = "antrea-type"
	ExternalIDContainerID  = "container-id"
	ExternalIDPodNamespace = "pod-namespace"
	ExternalIDPodName      = "pod-name"
	ExternalIDIP           = "ip"
	ExternalIDMAC          = "mac"
	ExternalIDIfName       = "cni-ifname"
	// AntreaTypeContainer marks the port of a pod.
	AntreaTypeContainer = "container"
)

// rollbackTimeout bounds the DEL that undoes a failed ADD; it runs even when
// the caller has gone away.
const rollbackTimeout = 30 * time.Second

// Deps are the components the CNIServer drives. OVS and Flows are required.
type Deps struct {
	// OVS creates and deletes the pods' OVS ports.
	OVS OVSPortClient
	// Flows installs and removes the pods' flows.
	Flows PodFlowInstaller
	// IPAM allocates pod addresses; nil means host-local on Config.PodCIDRs
	// with its store in Config.IPAMDataDir.
	IPAM ipam.Driver
}

// Attachment is one pod interface the server has set up.
type Attachment struct {
	ContainerID  string
	IfName       string
	PodNamespace string
	PodName      string
	// HostIfName is the host end of the veth pair and the OVS port name.
	HostIfName string
	PortUUID   string
	OFPort     int32
	IPs        []*current.IPConfig
	HostMAC    net.HardwareAddr
	PodMAC     net.HardwareAddr
}

func (a *Attachment) key() string { return a.ContainerID + "/" + a.IfName }

func (a *Attachment) ipList() []net.IP {
	out := make([]net.IP, 0, len(a.IPs))
	for _, c := range a.IPs {
		out = append(out, c.Address.IP)
	}
	return out
}

// Server is the CNIServer.
type Server struct {
	cnipb.UnimplementedCniServer

	cfg   Config
	ovs   OVSPortClient
	flows PodFlowInstaller
	ipam  ipam.Driver
	// gateways are the podCIDRs' gateway addresses (their first address).
	gateways []net.IP

	ready     chan struct{}
	readyOnce sync.Once

	locks keyedMutex

	mu          sync.Mutex
	attachments map[string]*Attachment

	// inject, when set (tests only), is called after each step of ADD has
	// succeeded; an error it returns fails ADD at that point.
	inject func(step string) error
}

// Steps of ADD, as named to the failure injector and in errors.
const (
	stepIPAM      = "ipam"
	stepInterface = "interface"
	stepOVSPort   = "ovs-port"
	stepOFPort    = "ofport"
	stepFlows     = "flows"
)

// New builds a CNIServer; it does not serve until Run.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.setDefaults()
	if deps.OVS == nil || deps.Flows == nil {
		return nil, errors.New("cniserver: Deps.OVS and Deps.Flows are required")
	}
	s := &Server{
		cfg:         cfg,
		ovs:         deps.OVS,
		flows:       deps.Flows,
		ipam:        deps.IPAM,
		ready:       make(chan struct{}),
		attachments: map[string]*Attachment{},
	}
	for _, cidr := range cfg.PodCIDRs {
		gw := make(net.IP, len(cidr.IP))
		copy(gw, cidr.IP.Mask(cidr.Mask))
		gw[len(gw)-1]++
		s.gateways = append(s.gateways, gw)
	}
	if s.ipam == nil {
		hl, err := ipam.NewHostLocal(cfg.NetworkName, cfg.IPAMDataDir, cfg.PodCIDRs)
		if err != nil {
			return nil, fmt.Errorf("cniserver on node %s: %w", cfg.NodeName, err)
		}
		s.ipam = hl
	}
	return s, nil
}

// SetReady tells the server that the agent's pod networking (bridge, gateway,
// pipeline) is in place: ADD stops waiting and STATUS reports ready.
func (s *Server) SetReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// Ready reports whether SetReady was called.
func (s *Server) Ready() bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

func (s *Server) waitReady(ctx context.Context) error {
	if s.Ready() {
		return nil
	}
	t := time.NewTimer(s.cfg.ReadyTimeout)
	defer t.Stop()
	select {
	case <-s.ready:
		return nil
	case <-t.C:
		return newError(cnipb.ErrorCode_TRY_AGAIN_LATER, nil,
			"antrea-agent on node %s is not ready for pod networking after %s, try again later", s.cfg.NodeName, s.cfg.ReadyTimeout)
	case <-ctx.Done():
		return newError(cnipb.ErrorCode_TRY_AGAIN_LATER, ctx.Err(), "antrea-agent on node %s is not ready for pod networking", s.cfg.NodeName)
	}
}

// Run rebuilds the attachments from OVSDB, then serves the CNI API on
// Config.SocketPath until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	if err := s.rebuild(ctx); err != nil {
		return err
	}
	socket := s.cfg.SocketPath
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return fmt.Errorf("create the directory of CNI socket %s: %w", socket, err)
	}
	// A socket file left by a previous agent would make Listen fail.
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale CNI socket %s: %w", socket, err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listen on CNI socket %s: %w", socket, err)
	}
	srv := grpc.NewServer()
	cnipb.RegisterCniServer(srv, s)
	klog.InfoS("Serving the CNI API", "socket", socket, "node", s.cfg.NodeName)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve CNI socket %s: %w", socket, err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	_ = os.Remove(socket)
	return nil
}

// rebuild recovers the attachments of a previous run from the external_ids
// of the pods' OVS ports.
func (s *Server) rebuild(ctx context.Context) error {
	ports, err := s.ovs.GetPortList(ctx)
	if err != nil {
		return fmt.Errorf("list OVS ports to recover pod attachments: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ports {
		a := s.attachmentFromPort(&p)
		if a == nil {
			continue
		}
		s.attachments[a.key()] = a
		klog.V(2).InfoS("Recovered pod attachment from OVS", "pod", klog.KRef(a.PodNamespace, a.PodName), "container", a.ContainerID, "port", a.HostIfName)
	}
	return nil
}

func (s *Server) attachmentFromPort(p *ovsconfig.OVSPortData) *Attachment {
	ids := p.ExternalIDs
	if ids[ExternalIDAntreaType] != AntreaTypeContainer || ids[ExternalIDContainerID] == "" {
		return nil
	}
	a := &Attachment{
		ContainerID:  ids[ExternalIDContainerID],
		IfName:       ids[ExternalIDIfName],
		PodNamespace: ids[ExternalIDPodNamespace],
		PodName:      ids[ExternalIDPodName],
		HostIfName:   p.Name,
		PortUUID:     p.UUID,
		OFPort:       p.OFPort,
	}
	if a.IfName == "" {
		a.IfName = "eth0"
	}
	a.PodMAC, _ = net.ParseMAC(ids[ExternalIDMAC])
	a.HostMAC, _ = net.ParseMAC(p.MAC)
	for _, f := range strings.Split(ids[ExternalIDIP], ",") {
		ip := net.ParseIP(strings.TrimSpace(f))
		if ip == nil {
			continue
		}
		for i, cidr := range s.cfg.PodCIDRs {
			if cidr.Contains(ip) {
				a.IPs = append(a.IPs, &current.IPConfig{Address: net.IPNet{IP: ip, Mask: cidr.Mask}, Gateway: s.gateways[i]})
			}
		}
	}
	return a
}

func (s *Server) getAttachment(key string) *Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attachments[key]
}

// Attachments returns a copy of every attachment (for the agent's
// introspection and for tests).
func (s *Server) Attachments() []Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Attachment, 0, len(s.attachments))
	for _, a := range s.attachments {
		out = append(out, *a)
	}
	return out
}

// CmdAdd implements the CNI ADD verb.
func (s *Server) CmdAdd(ctx context.Context, req *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	res, err := s.add(ctx, req)
	return s.respond("ADD", req, res, err), nil
}

// CmdDel implements the CNI DEL verb.
func (s *Server) CmdDel(ctx context.Context, req *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return s.respond("DEL", req, nil, s.del(ctx, req)), nil
}

// CmdCheck implements the CNI CHECK verb.
func (s *Server) CmdCheck(ctx context.Context, req *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return s.respond("CHECK", req, nil, s.check(ctx, req)), nil
}

// CmdStatus implements the CNI 1.1 STATUS verb: ready or PLUGIN_NOT_AVAILABLE.
func (s *Server) CmdStatus(_ context.Context, req *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	var err error
	if !s.Ready() {
		err = newError(cnipb.ErrorCode_PLUGIN_NOT_AVAILABLE, nil, "antrea-agent on node %s is not ready for pod networking", s.cfg.NodeName)
	}
	return s.respond("STATUS", req, nil, err), nil
}

// CmdGC implements the CNI 1.1 GC verb.
func (s *Server) CmdGC(ctx context.Context, req *cnipb.CniCmdRequest) (*cnipb.CniCmdResponse, error) {
	return s.respond("GC", req, nil, s.gc(ctx, req)), nil
}

func (s *Server) respond(verb string, req *cnipb.CniCmdRequest, result []byte, err error) *cnipb.CniCmdResponse {
	a := req.GetCniArgs()
	if err != nil {
		klog.ErrorS(err, "CNI request failed", "verb", verb, "container", a.GetContainerId(), "netns", a.GetNetns(), "args", a.GetArgs())
		return &cnipb.CniCmdResponse{Error: toProto(err)}
	}
	klog.V(2).InfoS("CNI request done", "verb", verb, "container", a.GetContainerId(), "args", a.GetArgs())
	return &cnipb.CniCmdResponse{CniResult: result}
}

func (s *Server) step(name string) error {
	if s.inject == nil {
		return nil
	}
	return s.inject(name)
}

func (s *Server) add(ctx context.Context, req *cnipb.CniCmdRequest) (_ []byte, err error) {
	r, err := parseRequest(req, validation{needNetns: true, needContainer: true, needPod: true})
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	unlock := s.locks.lock(r.ContainerID)
	defer unlock()
	if a := s.getAttachment(r.key()); a != nil {
		// A repeated ADD (the runtime lost our answer) gets the same result.
		return s.result(r, a)
	}
	a := &Attachment{
		ContainerID:  r.ContainerID,
		IfName:       r.IfName,
		PodNamespace: r.PodNamespace,
		PodName:      r.PodName,
		HostIfName:   hostInterfaceName(r.PodNamespace, r.PodName, r.ContainerID),
	}
	defer func() {
		if err == nil {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if derr := s.teardown(rctx, r, a); derr != nil {
			klog.ErrorS(derr, "Rollback of a failed ADD left resources behind", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID)
			return
		}
		klog.InfoS("Rolled back a failed ADD", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID, "cause", err)
	}()

	// Each step's duration goes into the success log: where ADD latency goes.
	took := stepTimer{last: time.Now()}
	owner := ipam.Owner{ContainerID: r.ContainerID, IfName: r.IfName, PodNamespace: r.PodNamespace, PodName: r.PodName}
	ips, err := s.ipam.Add(ctx, owner)
	if err == nil {
		err = s.step(stepIPAM)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_IPAM_FAILURE, err, "allocate an IP address for %s", r)
	}
	a.IPs = ips
	took.mark(stepIPAM)

	pi, err := setupPodInterface(s.cfg.HostNetNS, r.Netns, r.IfName, a.HostIfName, s.cfg.MTU, ips, defaultRoutes(ips))
	if err == nil {
		err = s.step(stepInterface)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "set up the interface of %s", r)
	}
	a.HostMAC, a.PodMAC = pi.hostMAC, pi.podMAC
	took.mark(stepInterface)

	a.PortUUID, err = s.ovs.CreatePort(ctx, a.HostIfName, portExternalIDs(a))
	if err == nil {
		err = s.step(stepOVSPort)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_OVS_PORT_FAILURE, err, "create OVS port %s for %s", a.HostIfName, r)
	}
	took.mark(stepOVSPort)
	a.OFPort, err = s.ovs.GetOFPort(ctx, a.HostIfName)
	if err == nil && a.OFPort <= 0 {
		err = fmt.Errorf("invalid OpenFlow port number %d", a.OFPort)
	}
	if err == nil {
		err = s.step(stepOFPort)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_OVS_PORT_FAILURE, err, "read the OpenFlow port of OVS port %s for %s", a.HostIfName, r)
	}
	took.mark(stepOFPort)

	err = s.flows.InstallPodFlows(a.HostIfName, a.ipList(), a.PodMAC, uint32(a.OFPort))
	if err == nil {
		err = s.step(stepFlows)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_FLOW_INSTALL_FAILURE, err, "install the flows of %s (port %s)", r, a.HostIfName)
	}
	took.mark(stepFlows)

	s.mu.Lock()
	s.attachments[a.key()] = a
	s.mu.Unlock()
	klog.InfoS("Pod interface added", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID,
		"port", a.HostIfName, "ofPort", a.OFPort, "ips", a.ipList(), "took", took.String())
	return s.result(r, a)
}

func portExternalIDs(a *Attachment) map[string]string {
	ips := make([]string, 0, len(a.IPs))
	for _, ip := range a.ipList() {
		ips = append(ips, ip.String())
	}
	return map[string]string{
		ExternalIDAntreaType:   AntreaTypeContainer,
		ExternalIDContainerID:  a.ContainerID,
		ExternalIDIfName:       a.IfName,
		ExternalIDPodNamespace: a.PodNamespace,
		ExternalIDPodName:      a.PodName,
		ExternalIDIP:           strings.Join(ips, ","),
		ExternalIDMAC:          a.PodMAC.String(),
	}
}

func defaultRoutes(ips []*current.IPConfig) []*types.Route {
	var routes []*types.Route
	for _, c := range ips {
		dst := net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		if c.Address.IP.To4() == nil {
			dst = net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		routes = append(routes, &types.Route{Dst: dst, GW: c.Gateway})
	}
	return routes
}

// result builds the CNI result of an attachment in the request's cniVersion.
func (s *Server) result(r *request, a *Attachment) ([]byte, error) {
	res := &current.Result{
		CNIVersion: "1.1.0",
		Interfaces: []*current.Interface{
			{Name: a.HostIfName, Mac: macString(a.HostMAC)},
			{Name: r.IfName, Mac: macString(a.PodMAC), Sandbox: r.Netns},
		},
		Routes: defaultRoutes(a.IPs),
		DNS:    s.cfg.DNS,
	}
	for _, c := range a.IPs {
		ipc := *c
		ipc.Interface = current.Int(1)
		res.IPs = append(res.IPs, &ipc)
	}
	if d := r.Conf.DNS; len(d.Nameservers) > 0 || len(d.Search) > 0 || d.Domain != "" || len(d.Options) > 0 {
		res.DNS = d
	}
	v, err := res.GetAsVersion(r.Conf.CNIVersion)
	if err != nil {
		return nil, newError(cnipb.ErrorCode_INCOMPATIBLE_CNI_VERSION, err, "convert the result of %s to cniVersion %s", r, r.Conf.CNIVersion)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, newError(cnipb.ErrorCode_UNKNOWN, err, "encode the result of %s", r)
	}
	return out, nil
}

func macString(m net.HardwareAddr) string {
	if len(m) == 0 {
		return ""
	}
	return m.String()
}

func (s *Server) del(ctx context.Context, req *cnipb.CniCmdRequest) error {
	r, err := parseRequest(req, validation{needContainer: true})
	if err != nil {
		return err
	}
	unlock := s.locks.lock(r.ContainerID)
	defer unlock()
	a := s.getAttachment(r.key())
	if a == nil && r.PodName != "" {
		a = &Attachment{ContainerID: r.ContainerID, IfName: r.IfName, PodNamespace: r.PodNamespace, PodName: r.PodName,
			HostIfName: hostInterfaceName(r.PodNamespace, r.PodName, r.ContainerID)}
	}
	if err := s.teardown(ctx, r, a); err != nil {
		return newError(cnipb.ErrorCode_UNKNOWN, err, "delete the interface of %s", r)
	}
	klog.InfoS("Pod interface deleted", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID)
	return nil
}

// teardown removes everything ADD may have made for an attachment, in the
// reverse order, tolerating what is already gone. a may be nil when neither
// the attachment nor the pod is known (only the IP can be released then).
func (s *Server) teardown(ctx context.Context, r *request, a *Attachment) error {
	var errs []error
	if a != nil && a.HostIfName != "" {
		portUUID := a.PortUUID
		if portUUID == "" {
			p, err := s.ovs.GetPortData(ctx, a.HostIfName)
			switch {
			case err == nil:
				portUUID = p.UUID
			case !errors.Is(err, ovsconfig.ErrNotFound):
				errs = append(errs, fmt.Errorf("look up OVS port %s: %w", a.HostIfName, err))
			}
		}
		if err := s.flows.UninstallPodFlows(a.HostIfName); err != nil {
			errs = append(errs, fmt.Errorf("uninstall the flows of port %s: %w", a.HostIfName, err))
		}
		if portUUID != "" {
			if err := s.ovs.DeletePort(ctx, portUUID); err != nil && !errors.Is(err, ovsconfig.ErrNotFound) {
				errs = append(errs, fmt.Errorf("delete OVS port %s: %w", a.HostIfName, err))
			}
		}
		if err := inNetNS(s.cfg.HostNetNS, func() error { return deleteHostInterface(a.HostIfName) }); err != nil {
			errs = append(errs, err)
		}
	}
	owner := ipam.Owner{ContainerID: r.ContainerID, IfName: r.IfName, PodNamespace: r.PodNamespace, PodName: r.PodName}
	if err := s.ipam.Del(ctx, owner); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		s.mu.Lock()
		delete(s.attachments, r.key())
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (s *Server) check(ctx context.Context, req *cnipb.CniCmdRequest) error {
	r, err := parseRequest(req, validation{needNetns: true, needContainer: true, needPod: true})
	if err != nil {
		return err
	}
	unlock := s.locks.lock(r.ContainerID)
	defer unlock()
	a := s.getAttachment(r.key())
	if a == nil {
		return newError(cnipb.ErrorCode_UNKNOWN_CONTAINER, nil, "CHECK: antrea-agent has no interface for %s", r)
	}
	var problems []string
	owner := ipam.Owner{ContainerID: r.ContainerID, IfName: r.IfName, PodNamespace: r.PodNamespace, PodName: r.PodName}
	if _, err := s.ipam.Check(ctx, owner); err != nil {
		problems = append(problems, fmt.Sprintf("IP allocation: %v", err))
	}
	var hostProblem string
	if err := inNetNS(s.cfg.HostNetNS, func() error { hostProblem = hostInterfaceProblem(a.HostIfName); return nil }); err != nil {
		problems = append(problems, fmt.Sprintf("cannot inspect host netns %s: %v", s.cfg.HostNetNS, err))
	}
	if hostProblem != "" {
		problems = append(problems, hostProblem)
	}
	var gws []net.IP
	for _, c := range a.IPs {
		gws = append(gws, c.Gateway)
	}
	problems = append(problems, podInterfaceProblems(r.Netns, r.IfName, a.ipList(), gws)...)
	p, err := s.ovs.GetPortData(ctx, a.HostIfName)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("OVS port %s: %v", a.HostIfName, err))
	case p.OFPort <= 0:
		problems = append(problems, fmt.Sprintf("OVS port %s has no valid OpenFlow port (%d) %s", a.HostIfName, p.OFPort, p.Error))
	case p.ExternalIDs[ExternalIDContainerID] != r.ContainerID:
		problems = append(problems, fmt.Sprintf("OVS port %s belongs to container %q", a.HostIfName, p.ExternalIDs[ExternalIDContainerID]))
	}
	if c, ok := s.flows.(PodFlowChecker); ok && !c.PodFlowsInstalled(a.HostIfName) {
		problems = append(problems, fmt.Sprintf("flows of port %s are missing", a.HostIfName))
	}
	if len(problems) > 0 {
		return newError(cnipb.ErrorCode_CHECK_INTERFACE_FAILURE, nil, "CHECK of %s failed: %s", r, strings.Join(problems, "; "))
	}
	return nil
}

func (s *Server) gc(ctx context.Context, req *cnipb.CniCmdRequest) error {
	r, err := parseRequest(req, validation{})
	if err != nil {
		return err
	}
	valid := map[string]bool{}
	for _, v := range r.Conf.ValidAttachments {
		valid[v.ContainerID+"/"+v.IfName] = true
	}
	var stale []Attachment
	for _, a := range s.Attachments() {
		if !valid[a.key()] {
			stale = append(stale, a)
		}
	}
	var errs []error
	for i := range stale {
		a := &stale[i]
		sr := &request{ContainerID: a.ContainerID, IfName: a.IfName, PodNamespace: a.PodNamespace, PodName: a.PodName}
		unlock := s.locks.lock(a.ContainerID)
		if err := s.teardown(ctx, sr, a); err != nil {
			errs = append(errs, err)
		} else {
			klog.InfoS("Garbage-collected a pod interface", "pod", klog.KRef(a.PodNamespace, a.PodName), "container", a.ContainerID)
		}
		unlock()
	}
	if err := s.ipam.GC(ctx, r.Conf.ValidAttachments); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return newError(cnipb.ErrorCode_UNKNOWN, errors.Join(errs...), "GC")
	}
	return nil
}

// stepTimer records how long each step of ADD took.
type stepTimer struct {
	last  time.Time
	steps []string
}

func (t *stepTimer) mark(step string) {
	now := time.Now()
	if !t.last.IsZero() {
		t.steps = append(t.steps, fmt.Sprintf("%s=%s", step, now.Sub(t.last).Round(100*time.Microsecond)))
	}
	t.last = now
}

func (t *stepTimer) String() string { return strings.Join(t.steps, " ") }

// keyedMutex is one mutex per key (container ID), created on demand and
// dropped when nobody holds or waits for it.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*refMutex{}
	}
	m := k.locks[key]
	if m == nil {
		m = &refMutex{}
		k.locks[key] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		m.refs--
		if m.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
