package cniserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/route"
	cnipb "antrea.io/antrea/pkg/apis/cni/v1beta1"
)

// Chained mode (trafficEncapMode networkPolicyOnly, Config.Chained): the
// runtime runs the primary CNI first (in the lab: the reference ptp plugin
// with host-local), which creates the pod's veth pair, gives the pod its
// addresses and a route of everything through its gateway, and routes each
// address to the host end (`10.10.1.5 dev veth…`). Antrea's ADD then
//   - takes the host end into br-int as the pod's port (ARP and IPv6 off
//     on it, as for Antrea's own veths), and turns the pod end's TX
//     checksum offload off (the netdev datapath needs it);
//   - moves the node's route to each pod address from the host end to
//     antrea-gw0, so that what the node sends to the pod crosses the
//     pipeline (upstream's policy-only design);
//   - installs the pod's flows, and returns the primary's result unchanged.
// DEL undoes it and gives the routes back to the host end; the primary's
// DEL then removes its veth and releases the addresses.

// chainedPod is what the primary's result says about the pod.
type chainedPod struct {
	prev    *current.Result
	host    string // the host end of the veth
	podMAC  net.HardwareAddr
	ips     []net.IP
	ipConfs []*current.IPConfig
}

// parseChained reads the primary's result (prevResult) of a chained ADD.
func parseChained(r *request) (*chainedPod, error) {
	if r.Conf.RawPrevResult == nil {
		return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil,
			"network configuration: prevResult is missing (trafficEncapMode networkPolicyOnly: antrea runs chained after the primary CNI in the conflist)")
	}
	if err := version.ParsePrevResult(&r.Conf.NetConf); err != nil {
		return nil, newError(cnipb.ErrorCode_DECODING_FAILURE, err, "network configuration: prevResult cannot be parsed")
	}
	prev, err := current.NewResultFromResult(r.Conf.PrevResult)
	if err != nil {
		return nil, newError(cnipb.ErrorCode_DECODING_FAILURE, err, "network configuration: prevResult cannot be converted")
	}
	p := &chainedPod{prev: prev}
	podIdx := -1
	for i, itf := range prev.Interfaces {
		switch {
		case itf.Sandbox == "" && p.host == "":
			p.host = itf.Name
		case itf.Sandbox != "" && itf.Name == r.IfName:
			podIdx = i
			if p.podMAC, err = net.ParseMAC(itf.Mac); err != nil {
				return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, err, "prevResult: interfaces[%d].mac %q of %s", i, itf.Mac, r.IfName)
			}
		}
	}
	if p.host == "" {
		return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil,
			"prevResult names no host interface (no interface without a sandbox): Antrea chains after a CNI that connects the pod with a veth pair, as ptp does")
	}
	if podIdx < 0 {
		return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil, "prevResult names no interface %s in the pod's sandbox", r.IfName)
	}
	for _, c := range prev.IPs {
		if c.Interface == nil || *c.Interface == podIdx {
			p.ips = append(p.ips, c.Address.IP)
			p.ipConfs = append(p.ipConfs, c)
		}
	}
	if len(p.ips) == 0 {
		return nil, newError(cnipb.ErrorCode_INVALID_NETWORK_CONFIG, nil, "prevResult gives %s no address", r.IfName)
	}
	return p, nil
}

// addChained is ADD in chained mode; the container's lock is held.
func (s *Server) addChained(ctx context.Context, r *request) (_ []byte, err error) {
	p, err := parseChained(r)
	if err != nil {
		return nil, err
	}
	if cfg := s.lookup(r.ContainerID, r.IfName); cfg != nil {
		if cfg.OVSPortConfig != nil && cfg.OFPort > 0 && s.flows.PodFlowsInstalled(cfg.InterfaceName) {
			return s.chainedResult(r, p) // a repeated ADD
		}
		klog.InfoS("An earlier chained ADD of this interface did not finish; making it again", "pod", klog.KRef(r.PodNamespace, r.PodName))
		if err := s.teardown(ctx, r, cfg); err != nil {
			return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "remove what an unfinished ADD of %s left", r)
		}
	}
	cfg := interfacestore.NewContainerInterface(p.host, r.ContainerID, r.PodName, r.PodNamespace, r.IfName, p.podMAC, p.ips, 0)
	cfg.PortMappings = r.PortMappings
	defer func() { s.rollback(ctx, r, cfg, err) }()
	took := stepTimer{last: time.Now()}
	if err := ns.WithNetNSPath(r.Netns, func(ns.NetNS) error { return disableTXChecksum(r.IfName) }); err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "configure the interface of %s", r)
	}
	if err := inNetNS(s.cfg.HostNetNS, func() error { return configureHostSide(p.host) }); err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "configure the host end %s of %s", p.host, r)
	}
	took.mark(stepInterface)
	octx, ocancel := context.WithTimeout(ctx, s.cfg.OVSDBTimeout)
	defer ocancel()
	portUUID, err := s.ovs.CreatePort(octx, p.host, interfacestore.BuildOVSPortExternalIDs(cfg))
	if err != nil {
		return nil, newError(cnipb.ErrorCode_OVS_PORT_FAILURE, err, "create OVS port %s for %s", p.host, r)
	}
	cfg.OVSPortConfig = &interfacestore.OVSPortConfig{PortUUID: portUUID}
	ofPort, err := s.ovs.GetOFPort(octx, p.host)
	if err == nil && ofPort <= 0 {
		err = fmt.Errorf("invalid OpenFlow port number %d", ofPort)
	}
	if err != nil {
		return nil, newError(cnipb.ErrorCode_OVS_PORT_FAILURE, err, "read the OpenFlow port of OVS port %s for %s", p.host, r)
	}
	cfg.OFPort = ofPort
	took.mark(stepOFPort)
	if err := inNetNS(s.cfg.HostNetNS, func() error { return ensureHostSideARPOff(p.host) }); err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "configure the host end %s of %s", p.host, r)
	}
	// The flows before the routes: once the node routes to the pod
	// through the gateway, the pipeline must know the pod.
	if err := s.flows.InstallPodFlows(p.host, p.ips, p.podMAC, uint32(ofPort)); err != nil {
		return nil, newError(cnipb.ErrorCode_FLOW_INSTALL_FAILURE, err, "install the flows of %s (port %s)", r, p.host)
	}
	took.mark(stepFlows)
	if err := inNetNS(s.cfg.HostNetNS, func() error { return s.takePodRoutes(p.host, p.ips) }); err != nil {
		return nil, newError(cnipb.ErrorCode_CONFIG_INTERFACE_FAILURE, err, "route %s through %s", r, s.cfg.GatewayName)
	}
	if err := s.installHostPorts(ctx, r, cfg); err != nil {
		return nil, err
	}
	took.mark(stepHostPorts)
	s.ifaces.AddInterface(cfg)
	s.publish(ctx, cfg, false)
	klog.InfoS("Pod interface added (chained)", "pod", klog.KRef(r.PodNamespace, r.PodName), "container", r.ContainerID,
		"port", p.host, "ofPort", ofPort, "ips", p.ips, "took", took.String())
	return s.chainedResult(r, p)
}

// chainedResult is the primary's result, in the request's cniVersion.
func (s *Server) chainedResult(r *request, p *chainedPod) ([]byte, error) {
	return encodeResult(r, p.prev)
}

// takePodRoutes moves the node's routes to the pod's addresses from the
// host end of its veth to the gateway (runs in the host netns).
func (s *Server) takePodRoutes(host string, ips []net.IP) error {
	return s.movePodRoutes(host, s.cfg.GatewayName, ips)
}

// returnPodRoutes gives them back to the host end, if it still exists.
func (s *Server) returnPodRoutes(host string, ips []net.IP) error {
	return s.movePodRoutes(s.cfg.GatewayName, host, ips)
}

// movePodRoutes routes each address (a host route) through link to instead
// of link from; a link that is gone is not an error.
func (s *Server) movePodRoutes(from, to string, ips []net.IP) error {
	var fromIdx int
	if l, err := netlink.LinkByName(from); err == nil {
		fromIdx = l.Attrs().Index
	}
	toLink, err := netlink.LinkByName(to)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		toLink = nil
	} else if err != nil {
		return fmt.Errorf("find %s: %w", to, err)
	}
	for _, ip := range ips {
		dst := hostPrefix(ip)
		if fromIdx != 0 {
			if err := netlink.RouteDel(&netlink.Route{LinkIndex: fromIdx, Dst: dst}); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("delete the route to %s through %s: %w", dst, from, err)
			}
		}
		if toLink == nil {
			continue
		}
		rt := &netlink.Route{LinkIndex: toLink.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK}
		if to == s.cfg.GatewayName {
			rt.Protocol = route.RTProtAntrea
		}
		if err := netlink.RouteReplace(rt); err != nil {
			return fmt.Errorf("route %s through %s: %w", dst, to, err)
		}
	}
	return nil
}

// hostPrefix is ip as a host route's destination (/32 or /128).
func hostPrefix(ip net.IP) *net.IPNet {
	if ip4 := ip.To4(); ip4 != nil {
		return &net.IPNet{IP: ip4, Mask: net.CIDRMask(32, 32)}
	}
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}
}
