//go:build tools

// Package hack pins the project's library dependencies so that parallel work
// on different packages shares one resolved go.mod. It is never built.
package hack

import (
	_ "github.com/containernetworking/cni/libcni"
	_ "github.com/containernetworking/cni/pkg/skel"
	_ "github.com/containernetworking/cni/pkg/types/100"
	_ "github.com/containernetworking/plugins/pkg/ip"
	_ "github.com/containernetworking/plugins/pkg/ns"
	_ "github.com/containernetworking/plugins/pkg/testutils"
	_ "github.com/mattfenwick/cyclonus/pkg/matcher"
	_ "github.com/ovn-org/libovsdb/client"
	_ "github.com/ovn-org/libovsdb/model"
	_ "github.com/safchain/ethtool"
	_ "github.com/spf13/cobra"
	_ "github.com/vishvananda/netlink"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/apiserver/pkg/server"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/code-generator"
	_ "k8s.io/klog/v2"
	_ "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)
