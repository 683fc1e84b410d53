package registry

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// tableRows turns a list or a single object into table rows.
func tableRows(obj runtime.Object, row func(runtime.Object) []any) (*metav1.Table, error) {
	t := &metav1.Table{}
	items := []runtime.Object{obj}
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, fmt.Errorf("rendering table: %w", err)
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			t.ResourceVersion = lm.GetResourceVersion()
		}
	}
	for _, item := range items {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: row(item), Object: runtime.RawExtension{Object: item}})
	}
	return t, nil
}

var groupColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the group"},
	{Name: "Members", Type: "integer", Description: "Number of members this reader sees"},
}

func groupTable(_ context.Context, obj runtime.Object) (*metav1.Table, error) {
	t, err := tableRows(obj, func(o runtime.Object) []any {
		switch g := o.(type) {
		case *controlplane.AddressGroup:
			return []any{g.Name, int64(len(g.GroupMembers))}
		case *controlplane.AppliedToGroup:
			return []any{g.Name, int64(len(g.GroupMembers))}
		case *controlplane.EgressGroup:
			return []any{g.Name, int64(len(g.GroupMembers))}
		}
		return []any{"", int64(0)}
	})
	if err != nil {
		return nil, err
	}
	t.ColumnDefinitions = groupColumns
	return t, nil
}

// policyTable renders policies with their source and realization.
type policyTable struct {
	status *StatusStore
}

var policyColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the internal policy (the source's UID)"},
	{Name: "Source", Type: "string", Description: "Type, namespace and name of the user's policy"},
	{Name: "Rules", Type: "integer", Description: "Number of rules"},
	{Name: "Generation", Type: "integer", Description: "Generation of the computed policy"},
	{Name: "Realized", Type: "string", Description: "Nodes that realized the current generation / Nodes in the span"},
	{Name: "Failed", Type: "integer", Priority: 1, Description: "Nodes that reported a realization failure"},
	{Name: "Tier-Priority", Type: "string", Description: "Priority of the Antrea-native policy's Tier (<none> for K8s NetworkPolicies)"},
	{Name: "Priority", Type: "string", Description: "Priority of the Antrea-native policy in its Tier (<none> for K8s NetworkPolicies)"},
}

// priorityStrings prints a policy's tier priority and priority as kubectl
// and antctl show them: <none> when unset (K8s NetworkPolicies).
func priorityStrings(tierPriority *int32, priority *float64) (string, string) {
	tier, prio := "<none>", "<none>"
	if tierPriority != nil {
		tier = strconv.Itoa(int(*tierPriority))
	}
	if priority != nil {
		prio = strconv.FormatFloat(*priority, 'g', -1, 64)
	}
	return tier, prio
}

func (p *policyTable) convert(_ context.Context, obj runtime.Object) (*metav1.Table, error) {
	t, err := tableRows(obj, func(o runtime.Object) []any {
		np, ok := o.(*controlplane.NetworkPolicy)
		if !ok {
			return []any{"", "", int64(0), int64(0), "", int64(0), "", ""}
		}
		source := ""
		if ref := np.SourceRef; ref != nil {
			source = string(ref.Type) + ":" + ref.Name
			if ref.Namespace != "" {
				source = string(ref.Type) + ":" + ref.Namespace + "/" + ref.Name
			}
		}
		realized, failed, desired := p.status.Realization(np.Name)
		tier, prio := priorityStrings(np.TierPriority, np.Priority)
		return []any{np.Name, source, int64(len(np.Rules)), np.Generation, fmt.Sprintf("%d/%d", realized, desired), int64(failed), tier, prio}
	})
	if err != nil {
		return nil, err
	}
	t.ColumnDefinitions = policyColumns
	return t, nil
}
