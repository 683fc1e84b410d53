// Package fileserver uploads files that the agents make (packet captures,
// support bundles) to the file server a user names in a CRD: an SFTP server
// given as sftp://host:port/path, with an optional pinned host key and the
// username and password of a Secret.
//
// An upload never leaves a partial file under its final name: the content is
// written to a temporary name in the same directory and renamed when it is
// complete, and the temporary file is removed on any failure. Credentials
// never appear in the errors it returns.
package fileserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Server is where to upload, and how to log in.
type Server struct {
	// URL is sftp://host:port[/path]; path is the directory files go to.
	URL string
	// HostPublicKey, in SSH wire format (RFC 4253 section 6.6), is the only
	// host key accepted; when empty any host key is accepted.
	HostPublicKey []byte
	Username      string
	Password      string
}

// ErrAuthentication is wrapped by the errors of an upload the server refused
// to log in (wrong username or password).
var ErrAuthentication = errors.New("authentication failed")

// ErrHostKey is wrapped by the errors of an upload whose server offered a
// host key other than the pinned one.
var ErrHostKey = errors.New("host key mismatch")

// Secret keys of the credentials (upstream's BasicAuthentication Secret).
const (
	SecretUsernameKey = "username"
	SecretPasswordKey = "password"
)

// ServerFromSecret is the Server at url with the username and password of a
// Secret (keys "username" and "password").
func ServerFromSecret(rawURL string, hostKey []byte, secret *corev1.Secret) (Server, error) {
	if secret == nil {
		return Server{}, errors.New("no Secret with the file server's credentials")
	}
	user, pass := secret.Data[SecretUsernameKey], secret.Data[SecretPasswordKey]
	if len(user) == 0 {
		return Server{}, fmt.Errorf("the Secret %s/%s has no %q", secret.Namespace, secret.Name, SecretUsernameKey)
	}
	if len(pass) == 0 {
		return Server{}, fmt.Errorf("the Secret %s/%s has no %q", secret.Namespace, secret.Name, SecretPasswordKey)
	}
	return Server{URL: rawURL, HostPublicKey: hostKey, Username: string(user), Password: string(pass)}, nil
}

// ParseURL splits sftp://host:port[/path] into the address to dial and the
// directory; a port is required, as upstream's CRDs require it.
func ParseURL(rawURL string) (addr, dir string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("url %q: %w", rawURL, err)
	}
	if u.Scheme != "sftp" {
		return "", "", fmt.Errorf("url %q: scheme %q is not supported (want sftp)", rawURL, u.Scheme)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("url %q: credentials belong in the Secret, not the URL", redactURL(u))
	}
	if u.Hostname() == "" || u.Port() == "" {
		return "", "", fmt.Errorf("url %q: want sftp://host:port[/path]", rawURL)
	}
	dir = u.Path
	if dir == "" {
		dir = "."
	}
	return net.JoinHostPort(u.Hostname(), u.Port()), dir, nil
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// Upload writes content as name in the server's directory: to a temporary
// name first, renamed to name when complete (an existing file of that name is
// replaced); the temporary file is removed on failure.
func Upload(ctx context.Context, s Server, name string, content io.Reader) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("file name %q: want a name without '/'", name)
	}
	addr, dir, err := ParseURL(s.URL)
	if err != nil {
		return err
	}
	hostKey := ssh.InsecureIgnoreHostKey()
	if len(s.HostPublicKey) > 0 {
		key, err := ssh.ParsePublicKey(s.HostPublicKey)
		if err != nil {
			return fmt.Errorf("hostPublicKey: %w", err)
		}
		hostKey = func(host string, remote net.Addr, offered ssh.PublicKey) error {
			if err := ssh.FixedHostKey(key)(host, remote, offered); err != nil {
				return fmt.Errorf("%w: server %s offered %s %s", ErrHostKey, host, offered.Type(), ssh.FingerprintSHA256(offered))
			}
			return nil
		}
	} else {
		klog.InfoS("No host public key given for the file server: any host key is accepted", "address", addr)
	}
	password := s.Password
	cfg := &ssh.ClientConfig{
		User: s.Username,
		Auth: []ssh.AuthMethod{
			ssh.Password(password),
			ssh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = password
				}
				return answers, nil
			}),
		},
		HostKeyCallback: hostKey,
		Timeout:         15 * time.Second,
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to the file server %s: %w", addr, err)
	}
	// The context bounds the whole upload: closing the connection ends any
	// call in progress.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	sshConn, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		if strings.Contains(err.Error(), "unable to authenticate") {
			return fmt.Errorf("log in to the file server %s as %q: %w", addr, s.Username, ErrAuthentication)
		}
		return fmt.Errorf("SSH handshake with the file server %s: %w", addr, err)
	}
	client := ssh.NewClient(sshConn, chans, reqs)
	defer client.Close()
	sc, err := sftp.NewClient(client)
	if err != nil {
		return fmt.Errorf("start SFTP on %s: %w", addr, err)
	}
	defer sc.Close()

	final := path.Join(dir, name)
	tmp := path.Join(dir, "."+name+".part")
	if err := write(sc, tmp, content); err != nil {
		_ = sc.Remove(tmp)
		return ctxErr(ctx, fmt.Errorf("upload %s to %s: %w", final, addr, err))
	}
	if err := sc.PosixRename(tmp, final); err != nil {
		// Servers without the posix-rename extension refuse to replace a file.
		_ = sc.Remove(final)
		if err := sc.Rename(tmp, final); err != nil {
			_ = sc.Remove(tmp)
			return ctxErr(ctx, fmt.Errorf("rename %s to %s on %s: %w", tmp, final, addr, err))
		}
	}
	klog.InfoS("Uploaded a file to the file server", "address", addr, "path", final)
	return nil
}

func write(sc *sftp.Client, name string, content io.Reader) error {
	f, err := sc.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	// Not f.ReadFrom: it takes a reader's io.ErrUnexpectedEOF for the end
	// of the content, and a truncated file would be renamed as complete.
	if _, err := io.Copy(struct{ io.Writer }{f}, content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ctxErr prefers the context's error when it ended the upload.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}
