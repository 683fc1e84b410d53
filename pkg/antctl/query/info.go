package query

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// The components report on themselves in the monitoring CRDs
// (docs/monitoring.md): each agent in the AntreaAgentInfo named after its
// Node, the controller in the AntreaControllerInfo "antrea-controller".

// ControllerInfoName is the name of the controller's AntreaControllerInfo.
const ControllerInfoName = "antrea-controller"

// AgentInfos returns the agents' reports: node's, or every agent's for "".
func AgentInfos(ctx context.Context, c *Clients, node string) ([]crdv1beta1.AntreaAgentInfo, error) {
	infos := c.Antrea.CrdV1beta1().AntreaAgentInfos()
	return oneOrAll(ctx, "AntreaAgentInfo", node, infos.Get, infos.List,
		func(l *crdv1beta1.AntreaAgentInfoList) []crdv1beta1.AntreaAgentInfo { return l.Items },
		"no AntreaAgentInfo of node %q: its agent has not reported%s")
}

// ControllerInfo returns the controller's report.
func ControllerInfo(ctx context.Context, c *Clients) (*crdv1beta1.AntreaControllerInfo, error) {
	info, err := c.Antrea.CrdV1beta1().AntreaControllerInfos().Get(ctx, ControllerInfoName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no AntreaControllerInfo %s: antrea-controller has not reported (is it running?)", ControllerInfoName)
	}
	if err != nil {
		return nil, fmt.Errorf("AntreaControllerInfo %s: %w", ControllerInfoName, err)
	}
	info.TypeMeta = metav1.TypeMeta{APIVersion: crdv1beta1.SchemeGroupVersion.String(), Kind: "AntreaControllerInfo"}
	return info, nil
}
