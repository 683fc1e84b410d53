package query

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/util/suggest"
)

// The components report on themselves in the monitoring CRDs
// (docs/monitoring.md): each agent in the AntreaAgentInfo named after its
// Node, the controller in the AntreaControllerInfo "antrea-controller".

// ControllerInfoName is the name of the controller's AntreaControllerInfo.
const ControllerInfoName = "antrea-controller"

// AgentInfos returns the agents' reports: node's, or every agent's for "".
func AgentInfos(ctx context.Context, c *Clients, node string) ([]crdv1beta1.AntreaAgentInfo, error) {
	infos := c.Antrea.CrdV1beta1().AntreaAgentInfos()
	tm := metav1.TypeMeta{APIVersion: crdv1beta1.SchemeGroupVersion.String(), Kind: "AntreaAgentInfo"}
	if node != "" {
		info, err := infos.Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			var names []string
			if l, lerr := infos.List(ctx, metav1.ListOptions{}); lerr == nil {
				for _, i := range l.Items {
					names = append(names, i.Name)
				}
			}
			return nil, fmt.Errorf("no AntreaAgentInfo of node %q: its agent has not reported%s", node, suggest.Hint(node, names))
		}
		if err != nil {
			return nil, fmt.Errorf("AntreaAgentInfo %s: %w", node, err)
		}
		info.TypeMeta = tm
		return []crdv1beta1.AntreaAgentInfo{*info}, nil
	}
	l, err := infos.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing AntreaAgentInfos: %w", err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	for i := range l.Items {
		l.Items[i].TypeMeta = tm
	}
	return l.Items, nil
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
