package app

import (
	"errors"
	"fmt"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/util/kernelconfig"
)

// checkEncryption refuses a trafficEncryptionMode the agent cannot run,
// saying why: ipsec needs the kernel's ESP (CONFIG_INET_ESP; this lab's
// kernel has none), and is only designed here (docs/design/ipsec.md);
// none and wireGuard run (wireGuard with the kernel's module or, where the
// kernel has none, wireguard-go: wireguard.Open chooses).
func checkEncryption(mode string, kernel kernelconfig.Paths) error {
	switch mode {
	case "", agentconfig.EncryptionModeNone:
		return nil
	case agentconfig.EncryptionModeIPsec:
		a, err := kernel.Has("CONFIG_INET_ESP", "esp4")
		switch {
		case errors.Is(err, kernelconfig.ErrUnknown):
			return fmt.Errorf("trafficEncryptionMode: ipsec needs the kernel's IPsec ESP (CONFIG_INET_ESP), and whether this kernel has it cannot be told (%v); besides, this Antrea does not build ipsec yet (docs/design/ipsec.md)", err)
		case err != nil:
			return fmt.Errorf("trafficEncryptionMode: ipsec: %w", err)
		case !a.Has:
			return fmt.Errorf("trafficEncryptionMode: ipsec needs the kernel's IPsec ESP (CONFIG_INET_ESP), which this kernel does not have (%s): run trafficEncryptionMode none, or a kernel with ESP (docs/design/ipsec.md)", a.Evidence)
		}
		return fmt.Errorf("trafficEncryptionMode: ipsec is designed (docs/design/ipsec.md) but not built by this Antrea yet; this kernel has ESP (%s)", a.Evidence)
	case agentconfig.EncryptionModeWireGuard:
		return nil
	}
	return fmt.Errorf("trafficEncryptionMode %q: want none, ipsec or wireGuard", mode)
}
