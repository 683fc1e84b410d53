package supportbundle

import (
	"regexp"
)

// What Redact replaces. Conservative: a value whose key merely looks like a
// secret's is replaced too (a bundle loses a boolean, never a token).
var (
	// PEM private keys, whole blocks (RSA, EC, PKCS#8, encrypted ...).
	pemPrivateKey = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)
	// key: value and key=value (YAML, conf files, JSON, flags, env) whose
	// key names a secret: tokens, passwords, secrets, private keys and the
	// kubeconfig's client-key-data.
	secretKeyValue = regexp.MustCompile(`(?i)((?:^|[\s{,"'-])"?[A-Za-z0-9_.-]*(?:token|passw(?:or)?d|secret|private[-_]?key|client[-_]?key(?:[-_]?data)?|api[-_]?key|credentials?)[A-Za-z0-9_.-]*"?\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,}\]]+)`)
	// Authorization: Bearer xxx, in logs of HTTP requests.
	bearer = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`)
	// JSON Web Tokens (ServiceAccount tokens) wherever they appear.
	jwt = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+`)
	// Basic auth in URLs: https://user:password@host.
	urlPassword = regexp.MustCompile(`(://[^/\s:@]+:)[^@/\s]+@`)
)

// Redacted replaces a secret.
const Redacted = "<redacted>"

// Redact replaces the secrets in data and says how many it replaced.
func Redact(data []byte) ([]byte, int) {
	n := 0
	count := func(re *regexp.Regexp, repl []byte) {
		data = re.ReplaceAllFunc(data, func(m []byte) []byte {
			n++
			return re.ReplaceAll(m, repl)
		})
	}
	count(pemPrivateKey, []byte("-----REDACTED ${1}PRIVATE KEY-----"))
	data = secretKeyValue.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := secretKeyValue.FindSubmatch(m)
		v := string(sub[2])
		switch v {
		case "", `""`, "''", "true", "false", "null", "{}", "[]":
			return m // nothing secret
		}
		n++
		return append(append([]byte{}, sub[1]...), Redacted...)
	})
	count(bearer, []byte("${1}"+Redacted))
	count(jwt, []byte(Redacted))
	count(urlPassword, []byte("${1}"+Redacted+"@"))
	return data, n
}
