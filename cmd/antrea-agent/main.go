// Command antrea-agent runs on every node: it owns the node's Open vSwitch,
// serves the CNI and programs the OpenFlow pipeline. See pkg/agent/app.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/app"
	"antrea.io/antrea/pkg/version"
)

func main() {
	var o app.Options
	fs := flag.NewFlagSet("antrea-agent", flag.ExitOnError)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (empty: in-cluster config)")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default $NODE_NAME)")
	fs.StringVar(&o.OVSRunDir, "ovs-run-dir", "/var/run/openvswitch", "run directory of ovsdb-server and ovs-vswitchd")
	fs.StringVar(&o.DatapathType, "ovs-datapath", "system", "OVS datapath type: system (kernel) or netdev (userspace)")
	fs.StringVar(&o.TunnelType, "tunnel-type", "geneve", "encapsulation between nodes: geneve or vxlan")
	fs.StringVar(&o.UplinkName, "uplink", "", "the node's underlay interface (moved into br-phy with the netdev datapath)")
	fs.StringVar(&o.CNISocket, "cni-socket", "/var/run/antrea/cni.sock", "unix socket of the CNI gRPC API")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", "/etc/cni/net.d", "directory the CNI conflist is written to (empty: do not write)")
	fs.StringVar(&o.IPAMDataDir, "ipam-data-dir", "/var/lib/antrea/ipam", "host-local IPAM state directory")
	fs.IntVar(&o.MTU, "mtu", 0, "pod MTU (0: the uplink MTU minus the tunnel overhead)")
	fs.BoolVar(&o.EnableProxy, "enable-proxy", true, "realize ClusterIP Services in OVS (AntreaProxy); off: leave Services to kube-proxy")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.String("antrea-agent"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	klog.InfoS("Starting antrea-agent", "version", version.String("antrea-agent"), "node", o.NodeName)
	if err := app.Run(ctx, o); err != nil {
		klog.ErrorS(err, "antrea-agent failed")
		klog.Flush()
		os.Exit(1)
	}
}
