package lab

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The outside host's SFTP server: OpenSSH's sshd with internal-sftp,
// chrooted, in netns OutsideNetNS on port 22. PacketCapture and
// SupportBundleCollection upload to it (docs/lab.md, "A world outside").
// The credentials are the lab's own, never a real account's: sshd reads
// its users from files of the lab, bind-mounted over /etc/passwd, shadow
// and group inside the mount namespace `ip netns exec` gives it alone.
const (
	SFTPPort     = 22
	SFTPUser     = "antrea"
	SFTPPassword = "antrea-lab-sftp"
	// SFTPUploadPath is the directory uploads go to, as the server names it.
	SFTPUploadPath = "/upload"
	// sftpUID owns the upload directory; no account of the host has it.
	sftpUID = 40022
)

// SFTPURL is the upload directory's URL, as a fileServer.url names it.
func SFTPURL() string {
	return "sftp://" + net.JoinHostPort(OutsideIP().String(), fmt.Sprint(SFTPPort)) + SFTPUploadPath
}

func (o Options) sftpDir() string { return filepath.Join(o.Dir, "sftp") }

// sftpRoot is the chroot of the SFTP user.
func (o Options) sftpRoot() string { return filepath.Join(o.sftpDir(), "root") }

// SFTPUploadDir is where the files uploaded to SFTPURL are, on this host.
func (o Options) SFTPUploadDir() string { return filepath.Join(o.sftpRoot(), SFTPUploadPath) }

// SFTPHostPublicKey is the server's host key in SSH wire format, as a
// fileServer.hostPublicKey takes it (base64-encoded in YAML).
func (o Options) SFTPHostPublicKey() ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(o.sftpDir(), "ssh_host_ed25519_key.pub"))
	if err != nil {
		return nil, fmt.Errorf("the lab's SFTP server: %w", err)
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, err
	}
	return key.Marshal(), nil
}

// startSFTPServer writes the server's files and starts sshd in the outside
// host's netns.
func (s *supervisor) startSFTPServer() error {
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/sshd"); serr != nil {
			return fmt.Errorf("the outside host's SFTP server needs OpenSSH's sshd (Debian's openssh-server; hack/install.sh installs it): %w", err)
		}
		sshd = "/usr/sbin/sshd"
	}
	o := s.opts
	dir := o.sftpDir()
	if err := os.MkdirAll(o.SFTPUploadDir(), 0o755); err != nil {
		return err
	}
	for _, d := range []string{dir, o.sftpRoot()} {
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chown(o.SFTPUploadDir(), sftpUID, sftpUID); err != nil {
		return err
	}
	if err := writeHostKey(dir); err != nil {
		return err
	}
	hash, err := cryptPassword(SFTPPassword)
	if err != nil {
		return err
	}
	// The host's own users (sshd's privilege separation user among them)
	// plus the lab's; the shadow file holds only the lab user's password.
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return err
	}
	group, err := os.ReadFile("/etc/group")
	if err != nil {
		return err
	}
	files := map[string]string{
		"passwd": string(passwd) + fmt.Sprintf("%s:x:%d:%d:antrea lab SFTP:%s:/usr/sbin/nologin\n", SFTPUser, sftpUID, sftpUID, SFTPUploadPath),
		"group":  string(group) + fmt.Sprintf("%s:x:%d:\n", SFTPUser, sftpUID),
		"shadow": fmt.Sprintf("root:*:19000:0:99999:7:::\n%s:%s:19000:0:99999:7:::\n", SFTPUser, hash),
		"sshd_config": strings.Join([]string{
			"ListenAddress " + net.JoinHostPort(OutsideIP().String(), fmt.Sprint(SFTPPort)),
			"HostKey " + filepath.Join(dir, "ssh_host_ed25519_key"),
			"PidFile none",
			"UsePAM no",
			"PasswordAuthentication yes",
			"KbdInteractiveAuthentication no",
			"PubkeyAuthentication no",
			"PermitRootLogin no",
			"AllowUsers " + SFTPUser,
			"ChrootDirectory /run/sftp",
			"ForceCommand internal-sftp -l INFO",
			"Subsystem sftp internal-sftp",
			"AllowTcpForwarding no",
			"X11Forwarding no",
			"LogLevel INFO",
		}, "\n") + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	// Inside the mount namespace of `ip netns exec` (its own, not the
	// host's): the lab's user files over /etc's, and a /run of its own for
	// sshd's privilege separation directory and the chroot (sshd wants every
	// component of a chroot's path root's and written by nobody else, which
	// the checkout's path need not be: /tmp is not).
	script := `set -e
mount --bind "$1/passwd" /etc/passwd
mount --bind "$1/group" /etc/group
mount --bind "$1/shadow" /etc/shadow
mount -t tmpfs -o mode=0755 antrea-lab-sftp /run
mkdir -m 0755 /run/sshd /run/sftp
mount --bind "$1/root" /run/sftp
shift
exec "$@"`
	s.logf("starting the outside host's SFTP server: %s (user %s)", SFTPURL(), SFTPUser)
	_, err = s.startDaemonWith("outside-sftp", "", OutsideNetNS,
		[]string{"ip", "netns", "exec", OutsideNetNS, "sh", "-c", script, "sh", dir},
		sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	return err
}

// writeHostKey makes the server's ed25519 host key once per lab.
func writeHostKey(dir string) error {
	path := filepath.Join(dir, "ssh_host_ed25519_key")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "antrea-lab outside host")
	if err != nil {
		return err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(block), 0o600)
}

// cryptPassword is password's SHA-512 crypt(3) hash, as /etc/shadow holds
// it (openssl passwd -6).
func cryptPassword(password string) (string, error) {
	salt := make([]byte, 8)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	cmd := exec.Command("openssl", "passwd", "-6", "-salt", hex.EncodeToString(salt), "-stdin")
	cmd.Stdin = strings.NewReader(password + "\n")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("openssl passwd: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
