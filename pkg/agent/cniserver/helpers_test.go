package cniserver

import (
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

func typesDNS() types.DNS {
	return types.DNS{Nameservers: []string{"10.0.0.10"}, Search: []string{"svc.cluster.local"}}
}

func netConfOf(version string) types.NetConf {
	return types.NetConf{CNIVersion: version, Name: "antrea", Type: "antrea"}
}

func ipConfigs(addr *net.IPNet, gw string) []*current.IPConfig {
	return []*current.IPConfig{{Address: *addr, Gateway: net.ParseIP(gw)}}
}
