package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/types/known/anypb"
	"k8s.io/klog/v2"
)

// Global is the speaker's own configuration; a change of it restarts the
// speaker.
type Global struct {
	ASN      uint32
	RouterID string
	// ListenAddress and ListenPort are where it accepts sessions.
	ListenAddress string
	ListenPort    int32
	// Confederation is the confederation it belongs to (nil: none).
	Confederation *Confederation
}

// Confederation is RFC 5065's: the identifier peers outside see, and the
// other member ASes.
type Confederation struct {
	Identifier uint32
	Members    []uint32
}

func (g Global) equal(o Global) bool {
	if g.ASN != o.ASN || g.RouterID != o.RouterID || g.ListenAddress != o.ListenAddress || g.ListenPort != o.ListenPort {
		return false
	}
	if (g.Confederation == nil) != (o.Confederation == nil) {
		return false
	}
	if g.Confederation == nil {
		return true
	}
	return g.Confederation.Identifier == o.Confederation.Identifier && fmt.Sprint(g.Confederation.Members) == fmt.Sprint(o.Confederation.Members)
}

// Peer is a session the speaker keeps; zero fields take the speaker's
// defaults.
type Peer struct {
	Address                    netip.Addr
	Port                       int32
	ASN                        uint32
	MultihopTTL                int32
	GracefulRestartTimeSeconds int32
	KeepaliveTimeSeconds       int32
	HoldTimeSeconds            int32
	// Password is the TCP MD5 signature key (RFC 2385), "" none.
	Password string
	// LocalAddress is the session's source address (the Node IP), so the
	// peer sees the Node's address and the routes' next hop is it.
	LocalAddress netip.Addr
	// Passive waits for the peer to connect.
	Passive bool
}

// PeerStatus is a peer and its session's state.
type PeerStatus struct {
	Peer
	// State is the session's FSM state (Idle, Connect, Active, OpenSent,
	// OpenConfirm, Established).
	State  string
	Uptime time.Duration
}

// GoBGP is the Speaker of github.com/osrg/gobgp/v3, in this process. One
// gobgp server serves every start and stop of the speaker.
type GoBGP struct {
	once sync.Once
	s    *server.BgpServer
}

// NewGoBGP makes the speaker; it listens only once started.
func NewGoBGP() *GoBGP {
	return &GoBGP{s: server.NewBgpServer(server.LoggerOption(klogLogger{}))}
}

// Start starts the speaker with g.
func (b *GoBGP) Start(ctx context.Context, g Global) error {
	b.once.Do(func() { go b.s.Serve() }) // gobgp's management loop (runs for the process's life)
	global := &api.Global{Asn: g.ASN, RouterId: g.RouterID, ListenPort: g.ListenPort}
	if g.ListenAddress != "" {
		global.ListenAddresses = []string{g.ListenAddress}
	}
	if c := g.Confederation; c != nil {
		global.Confederation = &api.Confederation{Enabled: true, Identifier: c.Identifier, MemberAsList: c.Members}
	}
	if err := b.s.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		return fmt.Errorf("start the BGP speaker (AS %d on %s:%d): %w", g.ASN, g.ListenAddress, g.ListenPort, err)
	}
	return nil
}

// Stop stops the speaker: its sessions close and its routes go.
func (b *GoBGP) Stop(ctx context.Context) error {
	return b.s.StopBgp(ctx, &api.StopBgpRequest{})
}

func family(a netip.Addr) *api.Family {
	if a.Is4() {
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
}

// AddPeer adds a session.
func (b *GoBGP) AddPeer(ctx context.Context, p Peer) error {
	peer := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: p.Password},
		AfiSafis: []*api.AfiSafi{{
			Config:            &api.AfiSafiConfig{Family: family(p.Address), Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port), PassiveMode: p.Passive},
	}
	if p.LocalAddress.IsValid() {
		peer.Transport.LocalAddress = p.LocalAddress.String()
	}
	if p.MultihopTTL > 0 {
		peer.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.MultihopTTL)}
	}
	if p.GracefulRestartTimeSeconds > 0 {
		peer.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: uint32(p.GracefulRestartTimeSeconds)}
	}
	if p.KeepaliveTimeSeconds > 0 || p.HoldTimeSeconds > 0 {
		peer.Timers = &api.Timers{Config: &api.TimersConfig{KeepaliveInterval: uint64(p.KeepaliveTimeSeconds), HoldTime: uint64(p.HoldTimeSeconds)}}
	}
	if err := b.s.AddPeer(ctx, &api.AddPeerRequest{Peer: peer}); err != nil {
		return fmt.Errorf("add BGP peer %s (AS %d): %w", p.Address, p.ASN, err)
	}
	return nil
}

// DeletePeer closes and removes a session.
func (b *GoBGP) DeletePeer(ctx context.Context, addr netip.Addr) error {
	if err := b.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		return fmt.Errorf("delete BGP peer %s: %w", addr, err)
	}
	return nil
}

// path is prefix originated here: origin IGP, next hop unspecified (gobgp
// puts the session's local address in its place when it sends it).
func path(prefix netip.Prefix) *api.Path {
	nlri, _ := anypb.New(&api.IPAddressPrefix{Prefix: prefix.Addr().String(), PrefixLen: uint32(prefix.Bits())})
	origin, _ := anypb.New(&api.OriginAttribute{Origin: 0})
	fam := family(prefix.Addr())
	var nh *anypb.Any
	if prefix.Addr().Is4() {
		nh, _ = anypb.New(&api.NextHopAttribute{NextHop: "0.0.0.0"})
	} else {
		nh, _ = anypb.New(&api.MpReachNLRIAttribute{Family: fam, NextHops: []string{"::"}, Nlris: []*anypb.Any{nlri}})
	}
	return &api.Path{Family: fam, Nlri: nlri, Pattrs: []*anypb.Any{origin, nh}}
}

// Advertise originates prefix to every peer of its family.
func (b *GoBGP) Advertise(ctx context.Context, prefix netip.Prefix) error {
	if _, err := b.s.AddPath(ctx, &api.AddPathRequest{Path: path(prefix)}); err != nil {
		return fmt.Errorf("advertise %s: %w", prefix, err)
	}
	return nil
}

// Withdraw withdraws prefix.
func (b *GoBGP) Withdraw(ctx context.Context, prefix netip.Prefix) error {
	if err := b.s.DeletePath(ctx, &api.DeletePathRequest{Path: path(prefix)}); err != nil {
		return fmt.Errorf("withdraw %s: %w", prefix, err)
	}
	return nil
}

// Peers lists the sessions and their states.
func (b *GoBGP) Peers(ctx context.Context) ([]PeerStatus, error) {
	var out []PeerStatus
	err := b.s.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		var st PeerStatus
		st.Address, _ = netip.ParseAddr(p.GetConf().GetNeighborAddress())
		st.ASN = p.GetConf().GetPeerAsn()
		st.Port = int32(p.GetTransport().GetRemotePort())
		st.MultihopTTL = int32(p.GetEbgpMultihop().GetMultihopTtl())
		st.GracefulRestartTimeSeconds = int32(p.GetGracefulRestart().GetRestartTime())
		st.State = sessionState(p.GetState().GetSessionState())
		if st.State == "Established" {
			if up := p.GetTimers().GetState().GetUptime(); up != nil {
				st.Uptime = time.Since(up.AsTime())
			}
		}
		out = append(out, st)
	})
	return out, err
}

// Received lists the prefixes the speaker learnt from its peers, with
// their next hops (a test reads a second speaker's table with it).
func (b *GoBGP) Received(ctx context.Context, fam netip.Addr) (map[netip.Prefix]string, error) {
	out := map[netip.Prefix]string{}
	err := b.s.ListPath(ctx, &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: family(fam)}, func(d *api.Destination) {
		p, err := netip.ParsePrefix(d.GetPrefix())
		if err != nil {
			return
		}
		for _, path := range d.GetPaths() {
			if !path.GetBest() {
				continue
			}
			out[p] = nextHop(path)
		}
	})
	return out, err
}

func nextHop(p *api.Path) string {
	for _, a := range p.GetPattrs() {
		var nh api.NextHopAttribute
		if a.UnmarshalTo(&nh) == nil {
			return nh.NextHop
		}
		var mp api.MpReachNLRIAttribute
		if a.UnmarshalTo(&mp) == nil && len(mp.NextHops) > 0 {
			return mp.NextHops[0]
		}
	}
	return ""
}

func sessionState(s api.PeerState_SessionState) string {
	switch s {
	case api.PeerState_IDLE:
		return "Idle"
	case api.PeerState_CONNECT:
		return "Connect"
	case api.PeerState_ACTIVE:
		return "Active"
	case api.PeerState_OPENSENT:
		return "OpenSent"
	case api.PeerState_OPENCONFIRM:
		return "OpenConfirm"
	case api.PeerState_ESTABLISHED:
		return "Established"
	}
	return "Unknown"
}

// klogLogger sends gobgp's logs to klog: errors and warnings as errors,
// its info (session changes) at verbosity 2, its debug at 5.
type klogLogger struct{}

func kv(f gobgplog.Fields) []any {
	out := make([]any, 0, 2*len(f))
	for k, v := range f {
		out = append(out, k, v)
	}
	return out
}

func (klogLogger) Panic(msg string, f gobgplog.Fields) {
	klog.ErrorS(nil, "gobgp: "+msg, kv(f)...)
	panic(msg)
}
func (klogLogger) Fatal(msg string, f gobgplog.Fields) {
	klog.ErrorS(nil, "gobgp: "+msg, kv(f)...)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}
func (klogLogger) Error(msg string, f gobgplog.Fields) { klog.ErrorS(nil, "gobgp: "+msg, kv(f)...) }
func (klogLogger) Warn(msg string, f gobgplog.Fields)  { klog.InfoS("gobgp warning: "+msg, kv(f)...) }
func (klogLogger) Info(msg string, f gobgplog.Fields)  { klog.V(2).InfoS("gobgp: "+msg, kv(f)...) }
func (klogLogger) Debug(msg string, f gobgplog.Fields) { klog.V(5).InfoS("gobgp: "+msg, kv(f)...) }
func (klogLogger) SetLevel(gobgplog.LogLevel)          {}
func (klogLogger) GetLevel() gobgplog.LogLevel         { return gobgplog.DebugLevel }
