// Package cniserver is the agent side of the CNI: a gRPC server on a unix
// socket that the antrea-cni shim calls for every pod. ADD follows seed 001
// (steps 2-8): validate the request, wait (bounded) until the agent is ready,
// take the container's lock, allocate addresses from the IPAM driver, create
// the veth pair into the pod netns, attach the host end to OVS with
// external_ids, configure addresses, routes and offloads, read back the
// OpenFlow port, install the pod's flows, record the interface and publish a
// pod event (the policy controller realizes the pod's policies on it); a
// failure at any step runs DEL, so nothing leaks.
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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver/ipam"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agenttypes "antrea.io/antrea/pkg/agent/types"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
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
	// InterfaceStore is the agent's interface cache, already initialized
	// from OVSDB (interfacestore.InterfaceConfigsFromOVSPorts); the server
	// records every pod interface in it. nil: the server keeps its own and
	// fills it from the OVS ports' external_ids in Run.
	InterfaceStore interfacestore.InterfaceStore
	// PodEvents, if set, receives an event after each pod interface was
	// recorded in or removed from the interface store (the policy
	// controller listens). Its reader must keep up: a send waits for it.
	PodEvents chan<- interfacestore.PodEvent
	// HostPorts installs the pods' hostPorts (runtimeConfig.portMappings);
	// nil: an ADD with portMappings is refused.
	HostPorts HostPortInstaller
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

	ifaces interfacestore.InterfaceStore
	// ownStore: ifaces was made here, so Run fills it from OVSDB.
	ownStore bool
	events   chan<- interfacestore.PodEvent
	// hostPorts may be nil (Deps.HostPorts).
	hostPorts HostPortInstaller

	// inject, when set (tests only), is called after each step of ADD has
	// succeeded; an error it returns fails ADD at that point.
	inject func(step string) error
}

// Steps of ADD, as named to the failure injector and in errors.
const (
	stepIPAM      = "ipam"
	stepVeth      = "veth"
	stepInterface = "interface"
	stepOVSPort   = "ovs-port"
	stepOFPort    = "ofport"
	stepFlows     = "flows"
	stepHostPorts = "hostports"
)

// New builds a CNIServer; it does not serve until Run.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg.setDefaults()
	if deps.OVS == nil || deps.Flows == nil {
		return nil, errors.New("cniserver: Deps.OVS and Deps.Flows are required")
	}
	s := &Server{
		cfg:    cfg,
		ovs:    deps.OVS,
		flows:  deps.Flows,
		ipam:   deps.IPAM,
		ready:  make(chan struct{}),
		ifaces: deps.InterfaceStore,
		events: deps.PodEvents,

		hostPorts: deps.HostPorts,
	}
	if s.ifaces == nil {
		s.ifaces, s.ownStore = interfacestore.NewInterfaceStore(), true
	}
	for _, cidr := range cfg.PodCIDRs {
		// host-local's default: the first address of the subnet.
		gw := append(net.IP(nil), cidr.IP.Mask(cidr.Mask)...)
		gw[len(gw)-1]++
		s.gateways = append(s.gateways, gw)
	}
	if s.ipam == nil && !cfg.Chained { // chained: the primary's IPAM allocates
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

// Run recovers the pod interfaces from OVSDB (when the server keeps its own
// interface store), then serves the CNI API on
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

// rebuild fills the server's own interface store from the external_ids of
// the OVS ports (an agent-provided store is the agent's to initialize).
func (s *Server) rebuild(ctx context.Context) error {
	if !s.ownStore {
		return nil
	}
	ports, err := s.ovs.GetPortList(ctx)
	if err != nil {
		return fmt.Errorf("list OVS ports to recover pod interfaces: %w", err)
	}
	s.ifaces.Initialize(interfacestore.InterfaceConfigsFromOVSPorts(ports))
	klog.InfoS("Recovered pod interfaces from OVS", "count", s.ifaces.GetContainerInterfaceNum())
	return nil
}

// lookup returns the stored interface of one attachment (container ID and
// interface name inside the pod).
func (s *Server) lookup(containerID, ifName string) *interfacestore.InterfaceConfig {
	if cfg, ok := s.ifaces.GetContainerInterface(containerID); ok && cfg.IFDev == ifName {
		return cfg
	}
	// A container with several interfaces: find the right one.
	for _, cfg := range s.ifaces.GetInterfacesByType(interfacestore.ContainerInterface) {
		if cfg.ContainerID == containerID && cfg.IFDev == ifName {
			return cfg
		}
	}
	return nil
}

// ipConfigs gives addresses their podCIDR's mask and gateway, for results
// built from the interface store (which keeps bare addresses).
func (s *Server) ipConfigs(ips []net.IP) []*current.IPConfig {
	var out []*current.IPConfig
	for _, ip := range ips {
		for i, cidr := range s.cfg.PodCIDRs {
			if cidr.Contains(ip) {
				out = append(out, &current.IPConfig{Address: net.IPNet{IP: ip, Mask: cidr.Mask}, Gateway: s.gateways[i]})
			}
		}
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
	if !s.Ready() {
		// Runtimes poll STATUS: "not yet" is an answer, not an error to log.
		klog.V(2).InfoS("CNI STATUS: not ready", "node", s.cfg.NodeName)
		return &cnipb.CniCmdResponse{Error: toProto(newError(cnipb.ErrorCode_PLUGIN_NOT_AVAILABLE, nil,
			"antrea-agent on node %s is not ready for pod networking", s.cfg.NodeName))}, nil
	}
	return s.respond("STATUS", req, nil, nil), nil
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
	if s.cfg.Chained {
		return s.addChained(ctx, r)
	}
	if cfg := s.lookup(r.ContainerID, r.IfName); cfg != nil {
		// A repeated ADD (the runtime lost our answer) gets the same result,
		// unless the interface is one an agent that died in the middle of
		// the ADD left half made (recorded in OVSDB, so in the store after
		// the restart): that is removed and made again.
		problems := s.unfinished(r, cfg)
		if len(problems) == 0 {
			return s.result(r, cfg, s.ipConfigs(cfg.IPs), nil)
		}
		klog.InfoS("An earlier ADD of this interface did not finish; making it again", "pod", klog.KRef(r.PodNamespace, r.PodName),
			"container", r.ContainerID, "problems", problems)
		if err := s.teardown(ctx, r, cfg); err != nil {
			return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "remove what an unfinished ADD of %s left", r)
		}
	}
	cfg := interfacestore.NewContainerInterface(hostInterfaceName(r.PodNamespace, r.PodName, r.ContainerID),
		r.ContainerID, r.PodName, r.PodNamespace, r.IfName, nil, nil, 0)
	// Recorded with the port (external_ids), so a restarted agent
	// installs them again.
	cfg.PortMappings = r.PortMappings
	host := cfg.InterfaceName
	defer func() { s.rollback(ctx, r, cfg, err) }()

	// Each step's duration goes into the success log: where ADD latency goes.
	took := stepTimer{last: time.Now()}
	ips, err := s.ipam.Add(ctx, owner(r))
	if err == nil {
		err = s.step(stepIPAM)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_IPAM_FAILURE, err, "allocate an IP address for %s", r)
	}
	for _, c := range ips {
		cfg.IPs = append(cfg.IPs, c.Address.IP)
	}
	took.mark(stepIPAM)

	pi, err := createVeth(s.cfg.HostNetNS, r.Netns, r.IfName, host, s.cfg.MTU)
	if err == nil {
		err = s.step(stepVeth)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "create the veth pair of %s", r)
	}
	cfg.MAC = pi.podMAC
	// The host end before it is an OVS port (configureHostSide says why).
	if err := inNetNS(s.cfg.HostNetNS, func() error { return configureHostSide(host) }); err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "configure the host end of %s", r)
	}
	took.mark(stepVeth)

	// OVSDB calls are bounded apart from the runtime's deadline: an ADD
	// while ovsdb-server is away fails in time, with a cause.
	octx, ocancel := context.WithTimeout(ctx, s.cfg.OVSDBTimeout)
	defer ocancel()
	portUUID, err := s.ovs.CreatePort(octx, host, interfacestore.BuildOVSPortExternalIDs(cfg))
	if err == nil {
		cfg.OVSPortConfig = &interfacestore.OVSPortConfig{PortUUID: portUUID}
		err = s.step(stepOVSPort)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_OVS_PORT_FAILURE, err, "create OVS port %s for %s", host, r)
	}
	took.mark(stepOVSPort)

	// Configured while ovs-vswitchd opens the new port and picks its
	// OpenFlow number, so GetOFPort rarely has to wait. The port has no flows
	// yet, so nothing flows through it before it is ready.
	err = configurePodInterface(r.Netns, r.IfName, ips, defaultRoutes(ips))
	if err == nil {
		err = s.step(stepInterface)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "configure the interface of %s", r)
	}
	took.mark(stepInterface)

	ofPort, err := s.ovs.GetOFPort(octx, host)
	if err == nil && ofPort <= 0 {
		err = fmt.Errorf("invalid OpenFlow port number %d", ofPort)
	}
	if err == nil {
		cfg.OFPort = ofPort
		err = s.step(stepOFPort)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_OVS_PORT_FAILURE, err, "read the OpenFlow port of OVS port %s for %s", host, r)
	}
	took.mark(stepOFPort)
	// ovs-vswitchd has opened the port: the host end must still have ARP
	// off (configureHostSide); set it again if that open lost it.
	if err := inNetNS(s.cfg.HostNetNS, func() error { return ensureHostSideARPOff(host) }); err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "configure the host end of %s", r)
	}

	err = s.flows.InstallPodFlows(host, cfg.IPs, cfg.MAC, uint32(ofPort))
	if err == nil {
		err = s.step(stepFlows)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_FLOW_INSTALL_FAILURE, err, "install the flows of %s (port %s)", r, host)
	}
	took.mark(stepFlows)

	err = s.installHostPorts(ctx, r, cfg)
	if err == nil {
		err = s.step(stepHostPorts)
	}
	if err != nil {
		return nil, err
	}
	took.mark(stepHostPorts)

	s.ifaces.AddInterface(cfg)
	s.publish(ctx, cfg, false)
	klog.InfoS("Pod interface added", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID,
		"port", host, "ofPort", ofPort, "ips", cfg.IPs, "took", took.String())
	return s.result(r, cfg, ips, pi.hostMAC)
}

// rollback undoes what a failed ADD (err, nil if it succeeded) made.
func (s *Server) rollback(ctx context.Context, r *request, cfg *interfacestore.InterfaceConfig, err error) {
	if err == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if derr := s.teardown(rctx, r, cfg); derr != nil {
		klog.ErrorS(derr, "Rollback of a failed ADD left resources behind", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID)
		return
	}
	klog.InfoS("Rolled back a failed ADD", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID, "cause", err)
}

// unfinished says what a recorded interface lacks that a finished ADD
// makes: the pod's addresses on its interface, and the port's flows (the
// last step).
func (s *Server) unfinished(r *request, cfg *interfacestore.InterfaceConfig) []string {
	var gws []net.IP
	for _, c := range s.ipConfigs(cfg.IPs) {
		gws = append(gws, c.Gateway)
	}
	problems := podInterfaceProblems(r.Netns, r.IfName, cfg.IPs, gws)
	if cfg.OVSPortConfig == nil || cfg.OFPort <= 0 {
		problems = append(problems, "no OpenFlow port recorded")
	}
	if !s.flows.PodFlowsInstalled(cfg.InterfaceName) {
		problems = append(problems, fmt.Sprintf("flows of port %s are missing", cfg.InterfaceName))
	}
	return problems
}

func owner(r *request) ipam.Owner {
	return ipam.Owner{ContainerID: r.ContainerID, IfName: r.IfName, PodNamespace: r.PodNamespace, PodName: r.PodName}
}

func defaultRoutes(ips []*current.IPConfig) []*types.Route {
	var routes []*types.Route
	for _, c := range ips {
		// The default route of the address's family: 0.0.0.0/0 or ::/0.
		bits := agenttypes.FamilyOfIP(c.Address.IP).Bits()
		dst := net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}
		routes = append(routes, &types.Route{Dst: dst, GW: c.Gateway})
	}
	return routes
}

// result builds the CNI result of an interface in the request's cniVersion.
// hostMAC may be nil (not recorded in the interface store).
func (s *Server) result(r *request, cfg *interfacestore.InterfaceConfig, ips []*current.IPConfig, hostMAC net.HardwareAddr) ([]byte, error) {
	res := &current.Result{
		CNIVersion: "1.1.0",
		Interfaces: []*current.Interface{
			{Name: cfg.InterfaceName, Mac: macString(hostMAC)},
			{Name: r.IfName, Mac: macString(cfg.MAC), Sandbox: r.Netns},
		},
		Routes: defaultRoutes(ips),
		DNS:    s.cfg.DNS,
	}
	for _, c := range ips {
		ipc := *c
		ipc.Interface = current.Int(1)
		res.IPs = append(res.IPs, &ipc)
	}
	if d := r.Conf.DNS; len(d.Nameservers) > 0 || len(d.Search) > 0 || d.Domain != "" || len(d.Options) > 0 {
		res.DNS = d
	}
	return encodeResult(r, res)
}

// encodeResult is res in the request's cniVersion, as JSON.
func encodeResult(r *request, res *current.Result) ([]byte, error) {
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
	cfg := s.lookup(r.ContainerID, r.IfName)
	if cfg == nil && r.PodName != "" {
		// Not recorded (an ADD that never finished, a store lost): the host
		// interface name can be derived again from the request.
		cfg = interfacestore.NewContainerInterface(hostInterfaceName(r.PodNamespace, r.PodName, r.ContainerID),
			r.ContainerID, r.PodName, r.PodNamespace, r.IfName, nil, nil, 0)
	}
	if err := s.teardown(ctx, r, cfg); err != nil {
		return newError(cnipb.ErrorCode_UNKNOWN, err, "delete the interface of %s", r)
	}
	klog.InfoS("Pod interface deleted", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID)
	return nil
}

// teardown removes everything ADD may have made for an interface, in the
// reverse order, tolerating what is already gone. cfg may be nil when neither
// the interface nor the pod is known (only the IP can be released then).
func (s *Server) teardown(ctx context.Context, r *request, cfg *interfacestore.InterfaceConfig) error {
	var errs []error
	if cfg != nil {
		host := cfg.InterfaceName
		if s.hostPorts != nil {
			if err := s.hostPorts.Delete(ctx, hostPortKey(cfg.ContainerID, cfg.IFDev)); err != nil {
				errs = append(errs, fmt.Errorf("remove the hostPorts of port %s: %w", host, err))
			}
		}
		octx, cancel := context.WithTimeout(ctx, s.cfg.OVSDBTimeout)
		defer cancel()
		var portUUID string
		if cfg.OVSPortConfig != nil {
			portUUID = cfg.PortUUID
		}
		if portUUID == "" {
			p, err := s.ovs.GetPortData(octx, host)
			switch {
			case err == nil:
				portUUID = p.UUID
			case !errors.Is(err, ovsconfig.ErrNotFound):
				errs = append(errs, fmt.Errorf("look up OVS port %s: %w", host, err))
			}
		}
		if err := s.flows.UninstallPodFlows(host); err != nil {
			errs = append(errs, fmt.Errorf("uninstall the flows of port %s: %w", host, err))
		}
		if portUUID != "" {
			if err := s.ovs.DeletePort(octx, portUUID); err != nil && !errors.Is(err, ovsconfig.ErrNotFound) {
				errs = append(errs, fmt.Errorf("delete OVS port %s: %w", host, err))
			}
		}
		if s.cfg.Chained {
			// The primary's veth is the primary's to delete; the route
			// to the pod goes back to it.
			if err := inNetNS(s.cfg.HostNetNS, func() error { return s.returnPodRoutes(host, cfg.IPs) }); err != nil {
				errs = append(errs, err)
			}
		} else if err := inNetNS(s.cfg.HostNetNS, func() error { return deleteHostInterface(host) }); err != nil {
			errs = append(errs, err)
		}
	}
	if s.cfg.Chained {
		// The primary's IPAM owns the addresses.
	} else if err := s.ipam.Del(ctx, owner(r)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if cfg != nil {
		s.ifaces.DeleteInterface(cfg)
		s.publish(ctx, cfg, true)
	}
	return nil
}

// publish tells the listener (the policy controller) that a pod's
// interface was recorded or removed.
func (s *Server) publish(ctx context.Context, cfg *interfacestore.InterfaceConfig, deleted bool) {
	if s.events == nil || cfg.PodName == "" {
		return
	}
	ev := interfacestore.PodEvent{PodNamespace: cfg.PodNamespace, PodName: cfg.PodName, ContainerID: cfg.ContainerID, Deleted: deleted}
	select {
	case s.events <- ev:
	case <-ctx.Done():
		klog.InfoS("Pod event not delivered: the request ended", "pod", klog.KRef(cfg.PodNamespace, cfg.PodName), "deleted", deleted)
	}
}

func (s *Server) check(ctx context.Context, req *cnipb.CniCmdRequest) error {
	r, err := parseRequest(req, validation{needNetns: true, needContainer: true, needPod: true})
	if err != nil {
		return err
	}
	unlock := s.locks.lock(r.ContainerID)
	defer unlock()
	cfg := s.lookup(r.ContainerID, r.IfName)
	if cfg == nil {
		return newError(cnipb.ErrorCode_UNKNOWN_CONTAINER, nil, "CHECK: antrea-agent has no interface for %s", r)
	}
	host := cfg.InterfaceName
	var problems []string
	if s.cfg.Chained {
		// The primary's CHECK judges its addresses and the pod's
		// interface.
	} else if _, err := s.ipam.Check(ctx, owner(r)); err != nil {
		problems = append(problems, fmt.Sprintf("IP allocation: %v", err))
	}
	var hostProblem string
	if err := inNetNS(s.cfg.HostNetNS, func() error { hostProblem = hostInterfaceProblem(host); return nil }); err != nil {
		problems = append(problems, fmt.Sprintf("cannot inspect host netns %s: %v", s.cfg.HostNetNS, err))
	}
	if hostProblem != "" {
		problems = append(problems, hostProblem)
	}
	var gws []net.IP
	for _, c := range s.ipConfigs(cfg.IPs) {
		gws = append(gws, c.Gateway)
	}
	if !s.cfg.Chained {
		problems = append(problems, podInterfaceProblems(r.Netns, r.IfName, cfg.IPs, gws)...)
	}
	p, err := s.ovs.GetPortData(ctx, host)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("OVS port %s: %v", host, err))
	case p.OFPort <= 0:
		problems = append(problems, fmt.Sprintf("OVS port %s has no valid OpenFlow port (%d) %s", host, p.OFPort, p.Error))
	case p.ExternalIDs[interfacestore.ExternalIDContainerID] != r.ContainerID:
		problems = append(problems, fmt.Sprintf("OVS port %s belongs to container %q", host, p.ExternalIDs[interfacestore.ExternalIDContainerID]))
	}
	if !s.flows.PodFlowsInstalled(host) {
		problems = append(problems, fmt.Sprintf("flows of port %s are missing", host))
	}
	problems = append(problems, s.hostPortProblems(cfg)...)
	problems = append(problems, prevResultProblems(&r.Conf.NetConf, cfg)...)
	if len(problems) > 0 {
		return newError(cnipb.ErrorCode_CHECK_INTERFACE_FAILURE, nil, "CHECK of %s failed: %s", r, strings.Join(problems, "; "))
	}
	return nil
}

// prevResultProblems compares the result the runtime cached for the pod
// (CHECK's prevResult) with the interface as recorded.
func prevResultProblems(conf *types.NetConf, cfg *interfacestore.InterfaceConfig) []string {
	if conf.RawPrevResult == nil {
		return nil
	}
	if err := version.ParsePrevResult(conf); err != nil {
		return []string{fmt.Sprintf("prevResult cannot be parsed: %v", err)}
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return []string{fmt.Sprintf("prevResult cannot be converted: %v", err)}
	}
	var problems []string
	for _, ipc := range prev.IPs {
		if !slices.ContainsFunc(cfg.IPs, ipc.Address.IP.Equal) {
			problems = append(problems, fmt.Sprintf("prevResult address %s is not the pod's (%v)", ipc.Address.IP, cfg.IPs))
		}
	}
	return problems
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
	var errs []error
	for _, cfg := range s.ifaces.GetInterfacesByType(interfacestore.ContainerInterface) {
		if valid[cfg.ContainerID+"/"+cfg.IFDev] {
			continue
		}
		sr := &request{ContainerID: cfg.ContainerID, IfName: cfg.IFDev, PodNamespace: cfg.PodNamespace, PodName: cfg.PodName}
		unlock := s.locks.lock(cfg.ContainerID)
		if err := s.teardown(ctx, sr, cfg); err != nil {
			errs = append(errs, err)
		} else {
			klog.InfoS("Garbage-collected a pod interface", "pod", klog.KRef(cfg.PodNamespace, cfg.PodName), "container", cfg.ContainerID)
		}
		unlock()
	}
	if s.ipam != nil { // chained: no IPAM of Antrea's
		if err := s.ipam.GC(ctx, r.Conf.ValidAttachments); err != nil {
			errs = append(errs, err)
		}
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
