package wireguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/klog/v2"
)

// DefaultKeyFile is where the agent keeps the node's WireGuard private key:
// under its state directory (/var/lib/antrea, a hostPath of the agent's
// DaemonSet), so that a restarted agent keeps its key. Why a file: the
// userspace device goes with the agent's process, and a new key at every
// restart would make every peer drop this node until the new annotation
// reached it; upstream keeps the key in the kernel device, which outlives
// the agent but not a reboot. Deleting the file and restarting the agent
// rotates the key (docs/design/wireguard.md).
const DefaultKeyFile = "/var/lib/antrea/wireguard/private.key"

// LoadOrCreateKey reads the private key in path (base64, as `wg genkey`
// writes it) or, when there is none, generates one and writes it there with
// mode 0600 (the directory 0700). created says it was generated. A file
// anybody but its owner can read is made 0600 again; a file that holds no
// key is refused, naming it: the agent does not replace a key it cannot
// read behind the operator's back.
func LoadOrCreateKey(path string) (key wgtypes.Key, created bool, err error) {
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, err := wgtypes.ParseKey(strings.TrimSpace(string(data)))
		if err != nil {
			return wgtypes.Key{}, false, fmt.Errorf("WireGuard private key file %s: %w (delete it to make a new key)", path, err)
		}
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
			klog.InfoS("WireGuard private key file was readable by others; making it 0600", "file", path, "mode", st.Mode().Perm())
			if err := os.Chmod(path, 0o600); err != nil {
				return wgtypes.Key{}, false, fmt.Errorf("WireGuard private key file %s: chmod 0600: %w", path, err)
			}
		}
		return key, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return wgtypes.Key{}, false, fmt.Errorf("WireGuard private key file %s: %w", path, err)
	}
	key, err = wgtypes.GeneratePrivateKey()
	if err != nil {
		return wgtypes.Key{}, false, fmt.Errorf("generate a WireGuard private key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return wgtypes.Key{}, false, fmt.Errorf("WireGuard key directory: %w", err)
	}
	// Written whole or not at all: a crash never leaves half a key.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".private.key-")
	if err != nil {
		return wgtypes.Key{}, false, fmt.Errorf("WireGuard private key file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.WriteString(key.String() + "\n")
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			return wgtypes.Key{}, false, fmt.Errorf("WireGuard private key file %s: %w", path, err)
		}
	} else {
		tmp.Close()
		return wgtypes.Key{}, false, fmt.Errorf("WireGuard private key file %s: %w", path, err)
	}
	return key, true, nil
}
