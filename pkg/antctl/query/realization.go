package query

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// tableAccept asks a Kubernetes API server for its table rendering of a list
// (what kubectl get prints).
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// PolicyRealization reads the controller's REALIZED column of
// networkpolicies: the status agents report is the controller's own record
// (networkpolicies/status is create-only), and its table is where it shows
// it. The result maps policy name to "realized/span".
func PolicyRealization(ctx context.Context, rc rest.Interface) (map[string]string, error) {
	body, err := rc.Get().Resource("networkpolicies").SetHeader("Accept", tableAccept).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the realization of networkpolicies: %w", err)
	}
	var t metav1.Table
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fmt.Errorf("reading the realization of networkpolicies: %w", err)
	}
	return realizationFromTable(&t)
}

// realizationFromTable picks the Name and Realized cells of each row.
func realizationFromTable(t *metav1.Table) (map[string]string, error) {
	nameCol, realCol := -1, -1
	for i, c := range t.ColumnDefinitions {
		switch strings.ToLower(c.Name) {
		case "name":
			nameCol = i
		case "realized":
			realCol = i
		}
	}
	if nameCol < 0 || realCol < 0 {
		return nil, fmt.Errorf("the controller's networkpolicies table has no Name and Realized columns")
	}
	out := map[string]string{}
	for _, r := range t.Rows {
		if len(r.Cells) <= max(nameCol, realCol) {
			continue
		}
		name, _ := r.Cells[nameCol].(string)
		out[name] = fmt.Sprint(r.Cells[realCol])
	}
	return out, nil
}
