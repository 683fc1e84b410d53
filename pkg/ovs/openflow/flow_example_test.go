package openflow_test

import (
	"fmt"
	"net/netip"

	"antrea.io/antrea/pkg/ovs/openflow"
)

func ExampleFlow() {
	f := &openflow.Flow{Table: 0, Priority: 100, Cookie: 0x1}
	f.Match.IPSrc(netip.MustParseAddr("10.0.0.1"))
	f.Actions = []openflow.Action{openflow.ResubmitToTable(1)}
	fmt.Println(f)

	g := openflow.NewFlow(10, 200)
	g.Match.CTState(openflow.CTStateTrk|openflow.CTStateNew, openflow.CTStateTrk|openflow.CTStateNew).TCPDst(80)
	g.Actions = []openflow.Action{
		openflow.Load(openflow.Reg(0).Range(0, 15), 0x2a),
		&openflow.CT{Commit: true, Zone: 65520, Table: 11},
	}
	fmt.Println(g)
	// Output:
	// cookie=0x1, priority=100,ip,nw_src=10.0.0.1 actions=resubmit(,1)
	// table=10, priority=200,ct_state=+new+trk,tcp,tp_dst=80 actions=set_field:0x2a/0xffff->reg0,ct(commit,table=11,zone=65520)
}
