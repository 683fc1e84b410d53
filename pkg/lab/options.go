// Package lab runs antrea-lab: a real multi-node Kubernetes cluster on one
// machine, made of network namespaces. A control-plane netns holds etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, antrea-controller
// and the lab's image registry; each node has a netns, a mount namespace and
// cgroups of its own, where containerd, kubelet, the node's OVS and
// antrea-agent run (or, with --kubelet sim, a node simulator instead of
// kubelet and containerd); an underlay netns holds the Linux bridge that
// joins them. The supervisor keeps every daemon as its child, relays the API
// server to 127.0.0.1:6443 in the root netns and records everything it made
// in a state file so that `down` can remove it, also after a crash.
package lab

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"antrea.io/antrea/pkg/testpod"
)

// Fixed names: one lab per machine. Everything the lab creates in the kernel
// carries the "antrea-lab-" prefix, which `down` relies on.
const (
	NetNSPrefix       = "antrea-lab-"
	UnderlayNetNS     = NetNSPrefix + "underlay"
	ControlPlaneNetNS = NetNSPrefix + "cp"
	// OutsideNetNS is a host on the underlay outside the cluster (no node):
	// the destination of pods' traffic to the world, which it reports.
	OutsideNetNS = NetNSPrefix + "outside"
	// RouterNetNS is the lab's BGP router (BIRD, router.go) on the underlay.
	RouterNetNS     = NetNSPrefix + "router"
	PodNetNSPrefix  = NetNSPrefix + "pod-"
	nodeNetNSPrefix = NetNSPrefix + "node-"
	underlayBridge  = "br-underlay"

	// APIServerPort is the port of kube-apiserver in the cp netns and of the
	// relay on the host's loopback.
	APIServerPort = 6443
	// ServiceCIDR and ClusterCIDR are the cluster's Service and Pod ranges.
	ServiceCIDR = "10.96.0.0/16"
	ClusterCIDR = "10.10.0.0/16"
	// NodeCIDRMaskSize is the prefix length of each node's podCIDR.
	NodeCIDRMaskSize = 24
	// ServiceCIDRv6, ClusterCIDRv6 and NodeCIDRMaskSizeV6 are the IPv6
	// ranges of a dual-stack lab (--ip-family dual): unique local
	// addresses (fd00::/8), which leave no lab netns.
	ServiceCIDRv6      = "fd00:10:96::/112"
	ClusterCIDRv6      = "fd00:10:244::/56"
	NodeCIDRMaskSizeV6 = 64
	// PodNetNSAnnotation is where the node simulator records a pod's netns name.
	PodNetNSAnnotation = "lab.antrea.io/netns"
)

// underlayPrefix is the underlay subnet; .1 is unused (no host address: the
// root netns is never touched), .2 is the control plane, .3 the outside host,
// .4 the router (BIRD),
// .11+ are nodes, .200-.249 are left free for external IPs (Egress IPs and
// LoadBalancer IPs from an ExternalIPPool).
var underlayPrefix = netip.MustParsePrefix("172.30.0.0/24")

// NodeRuntime selects what networks the pods of a node. It is the one switch
// to flip when nodes move from the reference plugins to Antrea.
type NodeRuntime string

const (
	// RuntimeReferenceCNI uses the reference bridge + host-local plugins; the
	// node simulator writes their conflist and routes other nodes' podCIDRs.
	RuntimeReferenceCNI NodeRuntime = "reference-cni"
	// RuntimeAntrea runs antrea-controller, and per node an OVS instance,
	// antrea-agent and antrea-cni.
	RuntimeAntrea NodeRuntime = "antrea"
)

// Options configure a lab.
type Options struct {
	// Nodes is the number of simulated nodes.
	Nodes int `json:"nodes"`
	// Encap is the tunnel type for the Antrea runtime: geneve, vxlan or gre.
	Encap string `json:"encap"`
	// TrafficMode is the agents' trafficEncapMode: encap (through Encap),
	// noEncap (the underlay routes pod traffic between the nodes, which
	// share its subnet) or hybrid (routed within a subnet, through Encap
	// across the router between subnets).
	TrafficMode string `json:"trafficMode,omitempty"`
	// IPFamily is the cluster's IP families: ipv4, or dual (IPv4 and IPv6
	// pod and Service CIDRs, dual-stack nodes: the underlay has an IPv6
	// address beside each IPv4 one, underlay6.go; the tunnel stays IPv4 and
	// carries the inner IPv6 frames), or ipv6 (an IPv6-only cluster: IPv6
	// pod and Service CIDRs alone, Nodes with an IPv6 InternalIP alone,
	// the control plane and the tunnel on the IPv6 underlay).
	IPFamily string `json:"ipFamily,omitempty"`
	// Encryption is the agents' trafficEncryptionMode: none or wireguard
	// (WireGuard between the nodes, port 51820; this kernel has no
	// WireGuard module, so the agents run wireguard-go).
	Encryption string `json:"encryption,omitempty"`
	// Subnets is the number of underlay subnets the nodes are spread over,
	// joined by the router (subnets.go); 0 or 1: one subnet.
	Subnets int `json:"subnets,omitempty"`
	// Runtime selects how pods are networked.
	Runtime NodeRuntime `json:"runtime"`
	// Kubelet selects real nodes (kubelet + containerd) or the simulator.
	Kubelet Kubelet `json:"kubelet"`
	// Proxy selects what realizes Services on real nodes: AntreaProxy or
	// kube-proxy (nftables mode), the reference Services are measured
	// against.
	Proxy Proxy `json:"proxy,omitempty"`
	// FlowVisibility deploys the Flow Aggregator (build/yamls/flow-aggregator.yml)
	// and turns the agents' FlowExporter on, sending to it
	// (--flow-visibility, alias --flow-aggregator).
	FlowVisibility bool `json:"flowVisibility,omitempty"`
	// UI deploys the web UI (build/yamls/antrea-ui.yml).
	UI bool `json:"ui,omitempty"`
	// SimNodes adds that many simulated Nodes beside the real ones
	// (pkg/lab/simnodes: Node objects with pod CIDRs, pods bound to them
	// marked Running by a fake kubelet, no containers), for scale runs
	// with the agent simulator (docs/scale.md).
	SimNodes int `json:"simNodes,omitempty"`
	// Dir holds the state file, certificates, kubeconfigs, logs and node data.
	Dir string `json:"dir"`
	// BinDir holds our binaries (antrea-lab, antrea-testpod, ...).
	BinDir string `json:"binDir"`
	// KubeBinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler.
	KubeBinDir string `json:"kubeBinDir"`
	// CNIBinDir holds the reference CNI plugins.
	CNIBinDir string `json:"cniBinDir"`
	// ImageDir is the image store the lab registry serves (ImageStoreDir).
	ImageDir string `json:"imageDir"`
}

// DefaultOptions derives the directories from where this binary lives:
// bin/antrea-lab in a checkout uses _output/ of that checkout. ANTREA_LAB_DIR
// overrides the lab directory.
func DefaultOptions() Options {
	root := repoRoot()
	o := Options{
		Nodes:       2,
		Encap:       "geneve",
		Encryption:  "none",
		TrafficMode: "encap",
		IPFamily:    IPFamilyV4,
		Subnets:     1,
		Runtime:     RuntimeAntrea,
		Kubelet:     KubeletReal,
		Proxy:       ProxyAntrea,
		Dir:         filepath.Join(root, "_output", "lab"),
		BinDir:      filepath.Join(root, "bin"),
		KubeBinDir:  filepath.Join(root, "_output", "bin"),
		CNIBinDir:   filepath.Join(root, "_output", "cni", "bin"),
		ImageDir:    ImageStoreDir(),
	}
	if d := os.Getenv("ANTREA_LAB_DIR"); d != "" {
		o.Dir = d
	}
	return o
}

// repoRoot is the checkout this binary belongs to: the parent of bin/ when the
// binary lives there, else the working directory.
func repoRoot() string {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if filepath.Base(dir) == "bin" {
			root := filepath.Dir(dir)
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				return root
			}
		}
	}
	wd, _ := os.Getwd()
	return wd
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Nodes < 1 || o.Nodes > 50 {
		return fmt.Errorf("--nodes must be between 1 and 50, got %d", o.Nodes)
	}
	switch o.Encap {
	case "geneve", "vxlan", "gre":
	default:
		return fmt.Errorf("--encap must be geneve, vxlan or gre, got %q", o.Encap)
	}
	switch o.TrafficMode {
	case "", "encap", "noEncap", "hybrid":
	case TrafficModeNetworkPolicyOnly:
		// The primary CNI (ptp) is installed on real nodes before
		// Antrea's manifest, which chains Antrea after it.
		if o.Runtime != RuntimeAntrea || o.Kubelet == KubeletSim {
			return fmt.Errorf("--traffic-mode %s needs --runtime %s and --kubelet %s (Antrea's manifest chains it after the nodes' primary CNI)", o.TrafficMode, RuntimeAntrea, KubeletReal)
		}
		if o.Subnets > 1 {
			return fmt.Errorf("--traffic-mode %s needs every node in one subnet: the lab stands in for the cloud's routes to the pods' addresses on one subnet", o.TrafficMode)
		}
		if !strings.EqualFold(o.Encryption, "") && !strings.EqualFold(o.Encryption, "none") {
			return fmt.Errorf("--traffic-mode %s with --encryption %s: the primary CNI carries pod traffic between nodes, Antrea does not encrypt it (as upstream)", o.TrafficMode, o.Encryption)
		}
	default:
		return fmt.Errorf("--traffic-mode must be encap, noEncap, hybrid or networkPolicyOnly, got %q", o.TrafficMode)
	}
	if err := o.validateIPFamily(); err != nil {
		return err
	}
	switch strings.ToLower(o.Encryption) {
	case "", "none":
		o.Encryption = "none"
	case "wireguard":
		o.Encryption = "wireguard"
		if o.Runtime != RuntimeAntrea || o.Kubelet == KubeletSim {
			return fmt.Errorf("--encryption wireguard needs --runtime %s and --kubelet %s (the agents read it from Antrea's manifest)", RuntimeAntrea, KubeletReal)
		}
		if o.IPFamily == IPFamilyDual || o.IPFamily == IPFamilyV6 {
			return fmt.Errorf("--encryption wireguard with --ip-family %s: WireGuard carries IPv4 Pod CIDRs only yet (docs/design/wireguard.md)", o.IPFamily)
		}
	case "ipsec":
		return fmt.Errorf("--encryption ipsec: this kernel has no ESP (CONFIG_INET_ESP), so the agents refuse it (docs/design/ipsec.md); want none or wireguard")
	default:
		return fmt.Errorf("--encryption must be none or wireguard, got %q", o.Encryption)
	}
	if o.Subnets == 0 {
		o.Subnets = 1
	}
	switch {
	case o.Subnets < 1 || o.Subnets > MaxSubnets:
		return fmt.Errorf("--subnets must be between 1 and %d, got %d", MaxSubnets, o.Subnets)
	case o.Subnets > o.Nodes:
		return fmt.Errorf("--subnets %d is more than --nodes %d: a subnet would hold no node", o.Subnets, o.Nodes)
	case o.Subnets > 1 && o.TrafficMode == "noEncap":
		// The lab's router forwards between the subnets but routes no pod
		// CIDR (as a plain underlay router would not): routed pod traffic
		// to a node behind it has nowhere to go.
		return fmt.Errorf("--traffic-mode noEncap needs every node in one subnet (the lab's router does not route pod CIDRs): use --subnets 1, or --traffic-mode hybrid to tunnel only across subnets")
	case o.Subnets > 1 && o.Runtime == RuntimeReferenceCNI:
		return fmt.Errorf("--subnets %d needs --runtime %s: the reference CNI's nodes route each other's pod CIDRs directly, which a router between subnets does not carry", o.Subnets, RuntimeAntrea)
	}
	switch o.Runtime {
	case RuntimeReferenceCNI:
	case RuntimeAntrea:
	default:
		return fmt.Errorf("unknown node runtime %q", o.Runtime)
	}
	switch o.Kubelet {
	case "":
		o.Kubelet = KubeletReal
	case KubeletReal:
		if o.Runtime == RuntimeReferenceCNI {
			return fmt.Errorf("--runtime %s needs --kubelet %s (real nodes run Antrea)", RuntimeReferenceCNI, KubeletSim)
		}
	case KubeletSim:
	default:
		return fmt.Errorf("--kubelet must be %s or %s, got %q", KubeletReal, KubeletSim, o.Kubelet)
	}
	switch o.Proxy {
	case "":
		o.Proxy = ProxyAntrea
	case ProxyAntrea:
	case ProxyKube:
		if o.Kubelet != KubeletReal || o.Runtime != RuntimeAntrea {
			return fmt.Errorf("--proxy %s needs --kubelet %s (it runs as a DaemonSet)", ProxyKube, KubeletReal)
		}
	default:
		return fmt.Errorf("--proxy must be %s or %s, got %q", ProxyAntrea, ProxyKube, o.Proxy)
	}
	if o.FlowVisibility && (o.Kubelet != KubeletReal || o.Runtime != RuntimeAntrea) {
		return fmt.Errorf("--flow-visibility needs --kubelet %s and --runtime %s (it runs as a Deployment, the exporter in the agents)", KubeletReal, RuntimeAntrea)
	}
	if o.UI && (o.Kubelet != KubeletReal || o.Runtime != RuntimeAntrea) {
		return fmt.Errorf("--ui needs --kubelet %s and --runtime %s (it runs as a Deployment)", KubeletReal, RuntimeAntrea)
	}
	if o.SimNodes < 0 || o.SimNodes > MaxSimNodes {
		return fmt.Errorf("--sim-nodes must be between 0 and %d, got %d", MaxSimNodes, o.SimNodes)
	}
	if o.ImageDir == "" {
		o.ImageDir = ImageStoreDir()
	}
	for _, d := range []*string{&o.Dir, &o.BinDir, &o.KubeBinDir, &o.CNIBinDir, &o.ImageDir} {
		abs, err := filepath.Abs(*d)
		if err != nil {
			return err
		}
		*d = abs
	}
	return nil
}

// Paths of files under the lab directory.
func (o Options) statePath() string          { return filepath.Join(o.Dir, "state.json") }
func (o Options) logDir() string             { return filepath.Join(o.Dir, "logs") }
func (o Options) pkiDir() string             { return filepath.Join(o.Dir, "pki") }
func (o Options) etcdDir() string            { return filepath.Join(o.Dir, "etcd") }
func (o Options) nodeDir(node string) string { return filepath.Join(o.Dir, "nodes", node) }

// StatePath is the state file of the lab.
func (o Options) StatePath() string { return o.statePath() }

// KubeconfigPath is the host kubeconfig (server https://127.0.0.1:6443).
func (o Options) KubeconfigPath() string { return filepath.Join(o.Dir, "kubeconfig") }

// LogDir is where every component's log lives.
func (o Options) LogDir() string { return o.logDir() }

// LogPath is the log file of a component, per node when node is not empty.
func (o Options) LogPath(component, node string) string {
	name := component
	if node != "" {
		name += "-" + node
	}
	return filepath.Join(o.logDir(), name+".log")
}

// controlPlaneIP is the API server's address on the underlay.
func controlPlaneIP() netip.Addr { return underlayPrefix.Addr().Next().Next() }

// ControlPlaneIP is the control plane's underlay address: a host on the
// nodes' network that is no node (tests use it as a client outside the cluster).
func ControlPlaneIP() netip.Addr { return controlPlaneIP() }

// OutsideIP is the address of the lab's outside host (netns OutsideNetNS):
// a machine on the nodes' network that is in no way part of the cluster.
func OutsideIP() netip.Addr { return controlPlaneIP().Next() }

// Ports of the outside host's server (antrea-testpod serve --name outside):
// TCP and UDP answer with "outside", HTTP answers GET /clientip with the
// address a connection arrived from, as agnhost netexec does.
const (
	OutsidePort     = 80
	OutsideHTTPPort = 8080
)

// OutsideZone is the DNS zone the outside host serves (antrea-testpod
// dns) from OutsideZoneFile, and the lab's CoreDNS forwards to it: toFQDN
// tests resolve its names and rewrite the file to change their answers
// (testpod.WriteZone). At start it holds DefaultOutsideZone.
const OutsideZone = "lab.test"

// DefaultOutsideZone are the records the lab starts with: www.lab.test is
// the outside host.
func DefaultOutsideZone() []testpod.ZoneRecord {
	return []testpod.ZoneRecord{{Name: "www." + OutsideZone, TTL: 30, Addr: OutsideIP()}}
}

// OutsideZoneFile is the outside host's zone file.
func (o Options) OutsideZoneFile() string {
	return filepath.Join(o.Dir, "outside", OutsideZone+".zone")
}

// ExternalIPRange is a range of underlay addresses that no lab host uses,
// for ExternalIPPools: an IP from it answers ARP from whichever node holds it.
func ExternalIPRange() (first, last netip.Addr) {
	return underlayAddr(200), underlayAddr(249)
}

func underlayAddr(host int) netip.Addr {
	a := underlayPrefix.Addr()
	for range host {
		a = a.Next()
	}
	return a
}

// nodeIP is the underlay address of node i (1-based) in subnet 1:
// 172.30.0.11, .12, ... (nodeIPIn for the others).
func nodeIP(i int) netip.Addr { return nodeIPIn(i, 1) }

// NodeName is the Kubernetes name of node i (1-based).
func NodeName(i int) string { return fmt.Sprintf("node-%d", i) }

func nodeNetNS(i int) string { return fmt.Sprintf("%s%d", nodeNetNSPrefix, i) }

// NodeNetNS is the netns of the node named NodeName(i) ("" for another name).
func NodeNetNS(node string) string {
	var i int
	if _, err := fmt.Sscanf(node, "node-%d", &i); err != nil || NodeName(i) != node {
		return ""
	}
	return nodeNetNS(i)
}

// IP families of a lab (--ip-family), upstream's names.
const (
	IPFamilyV4   = "ipv4"
	IPFamilyDual = "dual"
	IPFamilyV6   = "ipv6"
)

// validateIPFamily checks --ip-family against the other options: what
// upstream Antrea refuses is refused with its reason, what the lab does
// not build yet says so, and nothing starts half-configured.
func (o *Options) validateIPFamily() error {
	switch o.IPFamily {
	case "":
		o.IPFamily = IPFamilyV4
		return nil
	case IPFamilyV4:
		return nil
	case IPFamilyV6:
		if o.Encap == "gre" {
			return fmt.Errorf("--ip-family ipv6 with --encap gre: upstream Antrea refuses a GRE tunnel over an IPv6 underlay; use geneve or vxlan")
		}
	case IPFamilyDual:
	default:
		return fmt.Errorf("--ip-family must be ipv4, dual or ipv6, got %q", o.IPFamily)
	}
	f := o.IPFamily
	switch {
	case o.trafficMode() == TrafficModeNetworkPolicyOnly:
		return fmt.Errorf("--ip-family %s with --traffic-mode %s: the lab's primary CNI (ptp on host-local) and its routes to the pods stand in for the cloud over IPv4 only (docs/ipv6.md)", f, o.TrafficMode)
	case o.Runtime != RuntimeAntrea || o.Kubelet != KubeletReal:
		return fmt.Errorf("--ip-family %s needs --runtime %s and --kubelet %s (the reference CNI and the node simulator give pods IPv4 only)", f, RuntimeAntrea, KubeletReal)
	case o.Proxy == ProxyKube:
		return fmt.Errorf("--ip-family %s needs --proxy %s: the nodes route no IPv6 Service traffic into the bridge for kube-proxy (docs/ipv6.md)", f, ProxyAntrea)
	case f == IPFamilyV6 && (o.FlowVisibility || o.UI || o.SimNodes > 0):
		return fmt.Errorf("--ip-family ipv6 with --flow-visibility, --ui or --sim-nodes: their addons and the node simulator are IPv4-only yet (docs/ipv6.md)")
	}
	return nil
}

// dualStack reports whether the lab has IPv4 and IPv6 pod and Service CIDRs.
func (o Options) dualStack() bool { return o.IPFamily == IPFamilyDual }

// ipv6Only reports whether the lab is an IPv6-only cluster (--ip-family
// ipv6): IPv6 pod and Service CIDRs alone, Nodes with an IPv6 InternalIP
// alone, the control plane on its IPv6 underlay address.
func (o Options) ipv6Only() bool { return o.IPFamily == IPFamilyV6 }

// ipv6Underlay reports whether the underlay's hosts hold IPv6 addresses
// (underlay6.go): in a dual-stack and in an IPv6-only lab.
func (o Options) ipv6Underlay() bool { return o.dualStack() || o.ipv6Only() }

// serviceCIDRs is kube-apiserver's --service-cluster-ip-range.
func (o Options) serviceCIDRs() string {
	switch {
	case o.ipv6Only():
		return ServiceCIDRv6
	case o.dualStack():
		return ServiceCIDR + "," + ServiceCIDRv6
	}
	return ServiceCIDR
}

// clusterCIDRFlags are kube-controller-manager's --cluster-cidr and the
// node CIDR mask flags that go with it.
func (o Options) clusterCIDRFlags() []string {
	switch {
	case o.ipv6Only():
		return []string{"--cluster-cidr=" + ClusterCIDRv6, fmt.Sprintf("--node-cidr-mask-size=%d", NodeCIDRMaskSizeV6)}
	case o.dualStack():
		return []string{"--cluster-cidr=" + ClusterCIDR + "," + ClusterCIDRv6,
			fmt.Sprintf("--node-cidr-mask-size-ipv4=%d", NodeCIDRMaskSize), fmt.Sprintf("--node-cidr-mask-size-ipv6=%d", NodeCIDRMaskSizeV6)}
	}
	return []string{"--cluster-cidr=" + ClusterCIDR, fmt.Sprintf("--node-cidr-mask-size=%d", NodeCIDRMaskSize)}
}

// clusterDNS is the kube-dns Service's ClusterIP, which kubelet gives pods.
func (o Options) clusterDNS() string {
	if o.ipv6Only() {
		return ClusterDNSv6
	}
	return ClusterDNS
}

// apiServerIP is the address kube-apiserver advertises on the underlay, and
// the one the nodes (kubelet, antrea-agent) dial: its IPv6 address in an
// IPv6-only lab (the kubernetes Service's endpoint is of the Service
// CIDR's family). The lab's own plumbing (the relay, the supervisor's
// client, the image registry) keeps the IPv4 address.
func (o Options) apiServerIP() netip.Addr {
	if o.ipv6Only() {
		return underlayV6(controlPlaneIP())
	}
	return controlPlaneIP()
}

// apiServerURL is https://apiServerIP:APIServerPort.
func (o Options) apiServerURL() string {
	return "https://" + net.JoinHostPort(o.apiServerIP().String(), fmt.Sprint(APIServerPort))
}

// encryptionMode is Encryption as trafficEncryptionMode spells it.
func (o Options) encryptionMode() string {
	if strings.EqualFold(o.Encryption, "wireguard") {
		return "wireGuard"
	}
	return "none"
}

// trafficMode is TrafficMode, encap when unset (a lab state file written
// before the option existed).
func (o Options) trafficMode() string {
	if o.TrafficMode == "" {
		return "encap"
	}
	return o.TrafficMode
}
