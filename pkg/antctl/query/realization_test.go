package query

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/registry"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// TestRealizationReadsTheControllersTable serves the table the controller's
// registry renders and reads it through a real REST client, as antctl does.
func TestRealizationReadsTheControllersTable(t *testing.T) {
	reg := registry.NewNetworkPolicyREST(storage.NewNetworkPolicyStore(), registry.NewStatusStore(storage.NewNetworkPolicyStore()))
	tbl, err := reg.ConvertToTable(context.Background(), &controlplane.NetworkPolicyList{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The controller's columns, with rows of two policies.
	cells := func(name, realized string) []any {
		row := make([]any, len(tbl.ColumnDefinitions))
		for i, c := range tbl.ColumnDefinitions {
			switch c.Name {
			case "Name":
				row[i] = name
			case "Realized":
				row[i] = realized
			}
		}
		return row
	}
	tbl.Rows = []metav1.TableRow{{Cells: cells("p1", "1/2")}, {Cells: cells("p2", "0/0")}}
	tbl.Kind, tbl.APIVersion = "Table", "meta.k8s.io/v1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/controlplane.antrea.io/v1beta2/networkpolicies" || !strings.Contains(r.Header.Get("Accept"), "as=Table") {
			http.Error(w, "want a table of networkpolicies", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tbl)
	}))
	defer srv.Close()
	cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := PolicyRealization(context.Background(), cs.ControlplaneV1beta2().RESTClient())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["p1"] != "1/2" || got["p2"] != "0/0" {
		t.Errorf("realization %v, want p1 1/2 and p2 0/0", got)
	}
}
