package packetcapture

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/apiserver/agentapitest"
)

// TestTheAgentAPIServesCaptureFilesToTheAntctlRole: the agent API (real
// server, real kube-apiserver with the manifest's RBAC) serves
// /packetcaptures/NAME to a user bound to the antctl ClusterRole, and to
// nobody else.
func TestTheAgentAPIServesCaptureFilesToTheAntctlRole(t *testing.T) {
	dir := t.TempDir()
	content := []byte("the pcapng bytes")
	if err := os.WriteFile(filepath.Join(dir, "pc-test.pcapng"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Controller{cfg: Config{Dir: dir}, byName: map[string]*capture{}}
	api := agentapitest.Start(t, &agentapi.Querier{NodeName: "node-1"}, func(s *agentapi.Server) { s.Handle(APIPath, c.Handler()) })
	antctl := agentapitest.Token(t, api.Ctx, api.Kube, "alice", "antctl")
	if got := agentapitest.GetOK(t, api.Ctx, api.URL, antctl, APIPath+"pc-test"); string(got) != string(content) {
		t.Errorf("GET %spc-test answered %q, want the file's %q", APIPath, got, content)
	}
	if code, _ := agentapitest.Get(api.Ctx, api.URL, antctl, APIPath+"other"); code != http.StatusNotFound {
		t.Errorf("GET %sother: %d, want 404", APIPath, code)
	}
	nobody := agentapitest.Token(t, api.Ctx, api.Kube, "bob")
	if code, _ := agentapitest.Get(api.Ctx, api.URL, nobody, APIPath+"pc-test"); code != http.StatusForbidden {
		t.Errorf("GET %spc-test by a user without the antctl role: %d, want 403", APIPath, code)
	}
}
