package wireguard

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/klog/v2"
)

// userspaceDevice is antrea-wg0 as a TUN device served by wireguard-go in
// the agent's process: the kernel routes plaintext packets into the TUN,
// wireguard-go reads them, encrypts them and sends them from its UDP socket
// (in the agent's, i.e. the node's, network namespace); received datagrams
// are decrypted and written back into the TUN, where the kernel routes
// them on. The device lives as long as the agent: a restarted agent makes a
// new one with the same key (keys.go), so peers need no new handshake
// configuration, only a new handshake.
type userspaceDevice struct {
	name string
	dev  *device.Device
	mu   sync.Mutex
	// private is the configured private key (wireguard-go's UAPI does not
	// print the public one).
	private wgtypes.Key
}

func openUserspace(name string, mtu int) (Device, error) {
	if l, err := netlink.LinkByName(name); err == nil {
		// A kernel link or a persistent TUN of that name: the TUN could
		// not be made, so it goes (its peers are configured again).
		if err := netlink.LinkDel(l); err != nil {
			return nil, fmt.Errorf("delete the existing %s (%s): %w", name, l.Type(), err)
		}
	}
	t, err := tun.CreateTUN(name, mtu)
	if err != nil {
		return nil, fmt.Errorf("create TUN device %s (needs /dev/net/tun and CAP_NET_ADMIN): %w", name, err)
	}
	logger := &device.Logger{
		Verbosef: func(format string, args ...any) { klog.V(4).InfoS("wireguard-go: " + fmt.Sprintf(format, args...)) },
		Errorf:   func(format string, args ...any) { klog.InfoS("wireguard-go: " + fmt.Sprintf(format, args...)) },
	}
	d := device.NewDevice(t, conn.NewDefaultBind(), logger)
	l, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkSetUp(l)
	}
	if err == nil {
		err = d.Up()
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("bring %s up: %w", name, err)
	}
	return &userspaceDevice{name: name, dev: d}, nil
}

func (u *userspaceDevice) Name() string     { return u.name }
func (u *userspaceDevice) Backend() Backend { return BackendUserspace }

// Configure writes cfg to wireguard-go in its UAPI text form
// (https://www.wireguard.com/xplatform/, "set=1").
func (u *userspaceDevice) Configure(cfg wgtypes.Config) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := u.dev.IpcSet(uapiSet(cfg)); err != nil {
		return fmt.Errorf("configure %s: %w", u.name, err)
	}
	if cfg.PrivateKey != nil {
		u.private = *cfg.PrivateKey
	}
	return nil
}

// uapiSet is cfg in the UAPI's set form: keys in hex, one key=value a line.
func uapiSet(cfg wgtypes.Config) string {
	var b strings.Builder
	kv := func(k, v string) { b.WriteString(k + "=" + v + "\n") }
	if cfg.PrivateKey != nil {
		kv("private_key", hex.EncodeToString(cfg.PrivateKey[:]))
	}
	if cfg.ListenPort != nil {
		kv("listen_port", strconv.Itoa(*cfg.ListenPort))
	}
	if cfg.FirewallMark != nil {
		kv("fwmark", strconv.Itoa(*cfg.FirewallMark))
	}
	if cfg.ReplacePeers {
		kv("replace_peers", "true")
	}
	for _, p := range cfg.Peers {
		kv("public_key", hex.EncodeToString(p.PublicKey[:]))
		if p.Remove {
			kv("remove", "true")
			continue
		}
		if p.UpdateOnly {
			kv("update_only", "true")
		}
		if p.PresharedKey != nil {
			kv("preshared_key", hex.EncodeToString(p.PresharedKey[:]))
		}
		if p.Endpoint != nil {
			kv("endpoint", p.Endpoint.String())
		}
		if p.PersistentKeepaliveInterval != nil {
			kv("persistent_keepalive_interval", strconv.Itoa(int(p.PersistentKeepaliveInterval.Seconds())))
		}
		if p.ReplaceAllowedIPs {
			kv("replace_allowed_ips", "true")
		}
		for _, a := range p.AllowedIPs {
			kv("allowed_ip", a.String())
		}
	}
	return b.String()
}

// Peers reads wireguard-go's UAPI "get" output.
func (u *userspaceDevice) Peers() ([]wgtypes.Peer, error) {
	text, err := u.dev.IpcGet()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", u.name, err)
	}
	return parseUAPIPeers(text)
}

// parseUAPIPeers reads the peers of a UAPI "get" answer: each starts with
// public_key; the interface's own keys come before the first.
func parseUAPIPeers(text string) ([]wgtypes.Peer, error) {
	var peers []wgtypes.Peer
	var p *wgtypes.Peer
	var sec, nsec int64
	flush := func() {
		if p != nil {
			if sec != 0 || nsec != 0 {
				p.LastHandshakeTime = time.Unix(sec, nsec)
			}
			peers = append(peers, *p)
		}
		sec, nsec = 0, 0
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		if k == "public_key" {
			flush()
			key, err := hexKey(v)
			if err != nil {
				return nil, fmt.Errorf("uapi public_key %q: %w", v, err)
			}
			p = &wgtypes.Peer{PublicKey: key}
			continue
		}
		if p == nil {
			continue
		}
		var err error
		switch k {
		case "endpoint":
			p.Endpoint, err = net.ResolveUDPAddr("udp", v)
		case "allowed_ip":
			var n *net.IPNet
			if _, n, err = net.ParseCIDR(v); err == nil {
				p.AllowedIPs = append(p.AllowedIPs, *n)
			}
		case "rx_bytes":
			p.ReceiveBytes, err = strconv.ParseInt(v, 10, 64)
		case "tx_bytes":
			p.TransmitBytes, err = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_sec":
			sec, err = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_nsec":
			nsec, err = strconv.ParseInt(v, 10, 64)
		case "persistent_keepalive_interval":
			var s int64
			s, err = strconv.ParseInt(v, 10, 64)
			p.PersistentKeepaliveInterval = time.Duration(s) * time.Second
		}
		if err != nil {
			return nil, fmt.Errorf("uapi %s %q: %w", k, v, err)
		}
	}
	flush()
	return peers, sc.Err()
}

func hexKey(s string) (wgtypes.Key, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return wgtypes.Key{}, err
	}
	return wgtypes.NewKey(b)
}

func (u *userspaceDevice) PublicKey() (wgtypes.Key, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.private.PublicKey(), nil
}

// Close stops wireguard-go, which closes the TUN: the kernel removes the
// interface and its routes.
func (u *userspaceDevice) Close() error {
	u.dev.Close()
	return nil
}
