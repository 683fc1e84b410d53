package cniserver

import "github.com/containernetworking/cni/pkg/types"

func typesDNS() types.DNS {
	return types.DNS{Nameservers: []string{"10.0.0.10"}, Search: []string{"svc.cluster.local"}}
}

func netConfOf(version string) types.NetConf {
	return types.NetConf{CNIVersion: version, Name: "antrea", Type: "antrea"}
}
