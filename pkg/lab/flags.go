package lab

import (
	"github.com/spf13/pflag"
)

// Options and command-line flags meet here, and only here: AddGlobalFlags
// and AddUpFlags bind each option to its flag, and GlobalArgs and UpArgs
// turn options back into arguments by visiting those same flag sets, so a
// new option added to one of them is passed on everywhere antrea-lab runs
// itself (the detached supervisor of `up`, the tests' commands) with no
// second list to keep in step.

// AddGlobalFlags binds to fs the options every antrea-lab command takes:
// where the lab, the binaries and the images live.
func (o *Options) AddGlobalFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Dir, "dir", o.Dir, "lab directory: state, certificates, kubeconfig, logs")
	fs.StringVar(&o.BinDir, "bin-dir", o.BinDir, "directory of this project's binaries")
	fs.StringVar(&o.KubeBinDir, "kube-bin-dir", o.KubeBinDir, "directory of etcd and the Kubernetes binaries")
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", o.CNIBinDir, "directory of the reference CNI plugins")
	fs.StringVar(&o.ImageDir, "image-dir", o.ImageDir, "image store the lab registry serves (ANTREA_CACHE/images)")
}

// AddUpFlags binds to fs the options that choose a lab's shape (`up`).
func (o *Options) AddUpFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "number of nodes")
	fs.StringVar(&o.Encap, "encap", o.Encap, "tunnel type between nodes: geneve, vxlan or gre (Antrea runtime)")
	fs.StringVar(&o.TrafficMode, "traffic-mode", o.TrafficMode, "trafficEncapMode of the agents: encap (through --encap), noEncap (the underlay routes pod traffic; one subnet), hybrid (routed within a subnet, through --encap across subnets) or networkPolicyOnly (Antrea chained after the reference ptp CNI, which owns pod networking; one subnet; docs/design/traffic-modes.md); Antrea runtime")
	fs.StringVar(&o.IPFamily, "ip-family", o.IPFamily, "IP families of the cluster: ipv4, or dual (IPv4 and IPv6 pod and Service CIDRs from fd00::/8, dual-stack nodes with an IPv6 underlay address beside the IPv4 one, the tunnel over IPv4), or ipv6 (an IPv6-only cluster: IPv6 pod and Service CIDRs alone, Nodes with an IPv6 InternalIP alone, the control plane and the Geneve or VXLAN tunnel on the IPv6 underlay); dual and ipv6 work with encap, noEncap and hybrid (not networkPolicyOnly) and need the Antrea runtime and real kubelets; docs/ipv6.md")
	fs.StringVar(&o.Encryption, "encryption", o.Encryption, "trafficEncryptionMode of the agents: none, or wireguard (WireGuard between the nodes on UDP 51820; wireguard-go in the agents where the kernel has no WireGuard, as here; docs/design/wireguard.md)")
	fs.IntVar(&o.Subnets, "subnets", o.Subnets, "number of underlay subnets the nodes are spread over, joined by the lab's router (172.30.0.0/24, 172.30.1.0/24, ...; docs/lab.md)")
	fs.StringVar((*string)(&o.Runtime), "runtime", string(o.Runtime), "how pods are networked: reference-cni (bridge + host-local) or antrea")
	fs.StringVar((*string)(&o.Proxy), "proxy", string(o.Proxy), "what realizes Services on real nodes: antrea (AntreaProxy) or kube-proxy (v1.37.2, nftables mode, AntreaProxy off)")
	fs.StringVar((*string)(&o.Kubelet), "kubelet", string(o.Kubelet), "what runs pods on a node: real (kubelet + containerd + runc) or sim (the node simulator: pods are host processes)")
	fs.BoolVar(&o.FlowVisibility, "flow-visibility", o.FlowVisibility, "network flow visibility: deploy the Flow Aggregator (build/yamls/flow-aggregator.yml) and turn the agents' FlowExporter on, sending to it (docs/flow-export.md)")
	// The flag's earlier name, kept as an alias (hidden, never passed on).
	fs.BoolVar(&o.FlowVisibility, "flow-aggregator", o.FlowVisibility, "the same as --flow-visibility")
	_ = fs.MarkHidden("flow-aggregator")
	fs.BoolVar(&o.UI, "ui", o.UI, "deploy the web UI (build/yamls/antrea-ui.yml); open it with antctl ui (docs/ui.md)")
	fs.IntVar(&o.SimNodes, "sim-nodes", o.SimNodes, "add this many simulated Nodes (sim-node-NNNNN: pod CIDRs from 10.128.0.0/9, tainted NoSchedule; pods bound to them are marked Running by the lab's fake kubelet, no containers) for scale runs with antrea-agent-simulator (docs/scale.md)")
}

// GlobalArgs are the global flags (AddGlobalFlags) with o's values; they may
// go before or after the subcommand.
func (o Options) GlobalArgs() []string {
	return argsOf(&o, (*Options).AddGlobalFlags)
}

// UpArgs are the flags of `up` (AddUpFlags) with o's values.
func (o Options) UpArgs() []string {
	return argsOf(&o, (*Options).AddUpFlags)
}

// argsOf binds o to a fresh flag set with add and lists every flag of it as
// --name=value, in the order the flags were added.
func argsOf(o *Options, add func(*Options, *pflag.FlagSet)) []string {
	fs := pflag.NewFlagSet("args", pflag.ContinueOnError)
	fs.SortFlags = false
	add(o, fs)
	var args []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden { // an alias: its flag carries the value
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args
}
