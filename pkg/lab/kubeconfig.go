package lab

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for one user of the lab's API server.
func writeKubeconfig(path, server string, ca []byte, user *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["antrea-lab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: user.CertPEM, ClientKeyData: user.KeyPEM}
	cfg.Contexts["antrea-lab"] = &clientcmdapi.Context{Cluster: "antrea-lab", AuthInfo: "user"}
	cfg.CurrentContext = "antrea-lab"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
