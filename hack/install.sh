#!/usr/bin/env bash
# install.sh puts on this machine everything the project's tests and lab need:
# Debian packages (Open vSwitch, iproute2, ...), a real Kubernetes control plane
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and
# real nodes (kubelet, kube-proxy, containerd, runc, crictl) built from the Go
# module proxy, the upstream test images' contents (agnhost and a Debian rootfs
# with its tools, regression-issue-74839, busybox and nginx rootfses), the
# Debian rootfs of the antrea-agent image (Open vSwitch,
# iptables, ...), the upstream e2e.test, cnitool and the reference CNI
# plugins, and the Go tools the build uses. It is idempotent: every step is skipped when its output
# is already there, and every output lives under _output/ (ignored by git).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${ANTREA_OUTPUT:-$ROOT/_output}
BIN=$OUT/bin         # third-party binaries the lab and tests run
TOOLS=$OUT/tools     # Go tools used by the build (protoc plugins, linters)
CNIBIN=$OUT/cni/bin  # reference CNI plugins and cnitool
BUILD=$OUT/build     # scratch modules
# The control-plane binaries take minutes to build and depend only on their
# versions, so they are kept in a cache outside the checkout (a fresh clone,
# as CI makes, reuses them) and linked into $BIN.
CACHE=${ANTREA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/antrea}
mkdir -p "$BIN" "$TOOLS" "$CNIBIN" "$BUILD"

K8S_VERSION=v1.37.2
K8S_LIB_VERSION=v0.37.2
ETCD_VERSION=v3.7.3
CNI_VERSION=v1.3.1
CNI_PLUGINS_VERSION=v1.10.0
KUBECACHE=$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION
mkdir -p "$KUBECACHE"
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1
STATICCHECK_VERSION=v0.8.2
# The ginkgo CLI of the version e2e.test is built with (k8s.io/kubernetes
# $K8S_VERSION's go.mod): hack/e2e-upstream.sh runs the precompiled e2e.test
# under it with E2E_PROCS parallel processes, as upstream's hack/ginkgo-e2e.sh does.
GINKGO_VERSION=v2.32.0
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3
CRICTL_VERSION=v1.37.0
# Node runtime binaries, cached like the control plane.
NODECACHE=$CACHE/node-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-crictl-$CRICTL_VERSION
# The Debian rootfs of the agnhost image: the packages upstream's agnhost
# Dockerfile (test/images/agnhost/Dockerfile) installs on its Alpine base
# image, and busybox for the applets Alpine's base has and Debian's packages
# lack (customize_agnhost_rootfs links them). wget is GNU wget, not the
# applet: Debian 12's busybox 1.35 wget segfaults whenever it is given a
# timeout (`wget -q -O - -T 1 URL`, what upstream's Services specs run;
# checked on the host and in the image on 2026-12-06).
ROOTFS_PACKAGES=bash,curl,ca-certificates,netcat-openbsd,iproute2,iputils-ping,dnsutils,socat,iperf,procps,util-linux,less,busybox,wget
ROOTFS_SUITE=bookworm
# Bump when build_rootfs changes what it does to the rootfs.
ROOTFS_RECIPE=3
ROOTFS=$CACHE/rootfs-$ROOTFS_SUITE-$(printf '%s %s' "$ROOTFS_PACKAGES" "$ROOTFS_RECIPE" | sha256sum | cut -c1-12)
# The Debian rootfs of the antrea-agent image: Open vSwitch's userspace
# daemons and tools and what the agent runs (iptables, ipset, conntrack, ...).
AGENT_ROOTFS_PACKAGES=openvswitch-switch,openvswitch-common,iproute2,iptables,nftables,ipset,conntrack,ethtool,procps,ca-certificates,bash
# Bump when build_agent_rootfs (or debootstrap_rootfs) changes what it does.
AGENT_ROOTFS_RECIPE=1
AGENT_ROOTFS=$CACHE/rootfs-antrea-agent-$ROOTFS_SUITE-$(printf '%s %s' "$AGENT_ROOTFS_PACKAGES" "$AGENT_ROOTFS_RECIPE" | sha256sum | cut -c1-12)

log() { printf '[install] %s\n' "$*" >&2; }

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

# chromium: the web UI's browser test (pkg/ui, driven by chromedp).
# openssh-server: the SFTP server of the lab's outside host (pkg/lab, sftp.go),
# started only inside that netns (the image's policy-rc.d keeps the package
# from starting a host sshd).
# bird2: the lab's BGP router (pkg/lab, router.go), run in the foreground
# inside its netns by the supervisor (the image's policy-rc.d keeps the
# package from starting a host daemon).
apt_packages=(openvswitch-switch openvswitch-common iproute2 iputils-ping ethtool iptables iperf3 openssl protobuf-compiler jq conntrack tcpdump tshark procps libseccomp-dev debootstrap util-linux chromium openssh-server bird2)
install_apt() {
  local missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return; fi
  log "apt-get install ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# go_install_to DIR PKG@VERSION: installs a Go command into DIR unless present.
go_install_to() {
  local dir=$1 pkg=$2 name
  name=$(basename "${pkg%@*}")
  [ -x "$dir/$name" ] && return
  log "go install $pkg"
  GOBIN=$dir go install "$pkg"
}

build_etcd() {
  [ -x "$KUBECACHE/etcd" ] && return
  log "building etcd $ETCD_VERSION (a few minutes the first time)"
  local d=$BUILD/etcd
  mkdir -p "$d"
  cat >"$d/main.go" <<'GO'
// Command etcd runs the upstream etcd server.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$d" && rm -f go.mod go.sum && go mod init lab/etcd >/dev/null 2>&1 &&
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1 &&
    go build -trimpath -o "$KUBECACHE/etcd" .)
}

# The binaries built from the k8s.io/kubernetes scratch module: the control
# plane, the node agents, the test images' programs (test/images/NAME) and the
# e2e suite.
KUBE_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
KUBE_TEST_IMAGES=(agnhost regression-issue-74839)
build_kube() {
  local missing=0
  for b in "${KUBE_CMDS[@]}" "${KUBE_TEST_IMAGES[@]}" e2e.test; do
    [ -x "$KUBECACHE/$b" ] || missing=1
  done
  [ $missing -eq 0 ] && return
  log "building Kubernetes $K8S_VERSION binaries (about 6 minutes the first time)"
  local d=$BUILD/kube
  mkdir -p "$d"
  (cd "$d" && rm -f go.mod go.sum && go mod init lab/kube >/dev/null 2>&1)
  # Every staging module that k8s.io/kubernetes replaces must point at its published version.
  local modfile
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)
  local staging
  staging=$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&/=> \.\/staging/{print $1}' "$modfile")
  {
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo "replace ("
    for m in $staging; do echo "	$m => $m $K8S_LIB_VERSION"; done
    echo ")"
  } >>"$d/go.mod"
  cat >"$d/tools.go" <<'GO'
//go:build tools

// Package tools names the Kubernetes commands that this scratch module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/regression-issue-74839"
	_ "k8s.io/kubernetes/test/e2e"
)
GO
  (cd "$d" && go mod tidy >/dev/null 2>&1)
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  for b in "${KUBE_CMDS[@]}"; do
    [ -x "$KUBECACHE/$b" ] && continue
    log "  go build $b"
    (cd "$d" && nice go build -trimpath -ldflags "$ld" -o "$KUBECACHE/$b" "k8s.io/kubernetes/cmd/$b")
  done
  for b in "${KUBE_TEST_IMAGES[@]}"; do
    [ -x "$KUBECACHE/$b" ] && continue
    log "  go build $b (an upstream test image's program)"
    (cd "$d" && nice go build -trimpath -ldflags "-s -w" -o "$KUBECACHE/$b" "k8s.io/kubernetes/test/images/$b")
  done
  if [ ! -x "$KUBECACHE/e2e.test" ]; then
    log "  go test -c k8s.io/kubernetes/test/e2e (the upstream e2e suite)"
    (cd "$d" && nice go test -c -trimpath -ldflags "$ld" -o "$KUBECACHE/e2e.test" k8s.io/kubernetes/test/e2e)
  fi
  # agnhost's image also carries porter's test certificate (Dockerfile: ADD porter/localhost.*).
  local src
  src=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .Dir)
  for f in localhost.crt localhost.key; do
    [ -f "$KUBECACHE/agnhost-$f" ] || cp "$src/test/images/agnhost/porter/$f" "$KUBECACHE/agnhost-$f"
  done
}

# build_coredns builds the cluster DNS server of the lab's kube-dns: CoreDNS
# from the Go module proxy, linked with only the plugins a Kubernetes
# cluster's Corefile (kubeadm's) uses, in CoreDNS's own plugin order
# (core/dnsserver/zdirectives.go), which keeps the binary and its build small.
COREDNS_VERSION=v1.15.0
# Directive names; a plugin's package is plugin/<name> except prometheus's (plugin/metrics).
COREDNS_PLUGINS=(reload ready health prometheus errors log loadbalance cache hosts kubernetes loop forward)
build_coredns() {
  local dir=$CACHE/coredns-$COREDNS_VERSION
  if [ ! -x "$dir/coredns" ]; then
    log "go build CoreDNS $COREDNS_VERSION (about 2 minutes the first time)"
    local d=$BUILD/coredns p
    mkdir -p "$d" "$dir"
    (cd "$d" && rm -f go.mod go.sum && go mod init lab/coredns >/dev/null 2>&1)
    {
      echo "// Command coredns is CoreDNS $COREDNS_VERSION with the plugins of a Kubernetes cluster's Corefile."
      echo "package main"
      echo
      echo "import ("
      echo '	"github.com/coredns/coredns/core/dnsserver"'
      echo '	"github.com/coredns/coredns/coremain"'
      for p in "${COREDNS_PLUGINS[@]}"; do echo "	_ \"github.com/coredns/coredns/plugin/${p/#prometheus/metrics}\""; done
      echo ")"
      echo
      printf 'func init() { dnsserver.Directives = []string{'
      for p in "${COREDNS_PLUGINS[@]}"; do printf '"%s", ' "$p"; done
      echo '} }'
      echo
      echo "func main() { coremain.Run() }"
    } >"$d/main.go"
    (cd "$d" && gofmt -w main.go && go get "github.com/coredns/coredns@$COREDNS_VERSION" >/dev/null 2>&1 && go mod tidy >/dev/null 2>&1 &&
      nice go build -trimpath -ldflags "-s -w" -o "$dir/coredns.tmp" . && mv "$dir/coredns.tmp" "$dir/coredns")
  fi
  ln -sfn "$dir/coredns" "$BIN/coredns"
}

# build_node_runtime builds containerd, its runc shim, runc (cgo, seccomp:
# kubelet asks for the RuntimeDefault profile) and crictl.
build_node_runtime() {
  mkdir -p "$NODECACHE"
  local b
  for b in containerd ctr containerd-shim-runc-v2; do
    [ -x "$NODECACHE/$b" ] && continue
    log "go install containerd's $b $CONTAINERD_VERSION"
    GOBIN=$NODECACHE nice go install "github.com/containerd/containerd/v2/cmd/$b@$CONTAINERD_VERSION"
  done
  if [ ! -x "$NODECACHE/runc" ]; then
    log "go install runc $RUNC_VERSION (cgo, seccomp, static)"
    GOBIN=$NODECACHE CGO_ENABLED=1 nice go install -tags seccomp -ldflags '-extldflags -static' "github.com/opencontainers/runc@$RUNC_VERSION"
  fi
  if [ ! -x "$NODECACHE/crictl" ]; then
    log "go install crictl $CRICTL_VERSION"
    GOBIN=$NODECACHE nice go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  fi
}

# debootstrap_rootfs DIR PACKAGES [CUSTOMIZE]: makes DIR, a Debian
# $ROOTFS_SUITE minbase rootfs with PACKAGES (comma-separated) from this
# machine's Debian mirror, unless DIR/.complete says it is there. CUSTOMIZE,
# if given, is a function run with the unfinished rootfs's path before it is
# trimmed of docs, locales, apt lists and logs. DIR appears only when complete.
debootstrap_rootfs() {
  local dir=$1 packages=$2 customize=${3:-} mirror
  [ -f "$dir/.complete" ] && return
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  log "debootstrap $ROOTFS_SUITE ($packages) from $mirror into $dir (about 30 s)"
  local logfile=$CACHE/debootstrap-$(basename "$dir").log
  rm -rf "$dir.tmp"
  nice debootstrap --variant=minbase --include="$packages" "$ROOTFS_SUITE" "$dir.tmp" "$mirror" >"$logfile" 2>&1 ||
    { tail -20 "$logfile" >&2; exit 1; }
  [ -z "$customize" ] || "$customize" "$dir.tmp"
  rm -rf "$dir.tmp"/usr/share/{doc,man,info,locale}/* "$dir.tmp"/var/lib/apt/lists/* "$dir.tmp"/var/cache/apt/*.bin \
    "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/log/*
  touch "$dir.tmp/.complete"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}

# build_rootfs makes the Debian rootfs of the agnhost image.
build_rootfs() { debootstrap_rootfs "$ROOTFS" "$ROOTFS_PACKAGES" customize_agnhost_rootfs; }

# customize_agnhost_rootfs adds what agnhost's Dockerfile adds besides
# packages: /uploads (netexec), the iperf link, and the user and group an e2e
# SupplementalGroups test expects; then it links every busybox applet that
# no Debian package of the rootfs provides, as upstream's Alpine base has
# them (e2e specs run `wget` in agnhost). /bin/sh stays Debian's dash.
customize_agnhost_rootfs() {
  local root=$1
  mkdir -p "$root/uploads"
  ln -sfn /usr/bin/iperf "$root/usr/local/bin/iperf"
  chroot "$root" /bin/sh -c 'groupadd -g 50000 group-defined-in-image &&
    useradd -u 1000 -M -s /bin/sh -G group-defined-in-image user-defined-in-image'
  link_busybox_applets "$root"
}

# link_busybox_applets ROOT links, at the path busybox names for it
# (`busybox --list-full`), each applet of ROOT's /bin/busybox whose name no
# directory of PATH in ROOT holds yet.
link_busybox_applets() {
  local root=$1 path name dir have linked=0
  while read -r path; do
    case $path in */*) ;; *) continue ;; esac # linuxrc: not a command
    name=${path##*/}
    have=0
    for dir in usr/local/sbin usr/local/bin usr/sbin usr/bin sbin bin; do
      if [ -e "$root/$dir/$name" ] || [ -L "$root/$dir/$name" ]; then have=1; break; fi
    done
    [ $have -eq 1 ] && continue
    ln -s /bin/busybox "$root/$path"
    linked=$((linked + 1))
  done < <(chroot "$root" /bin/busybox --list-full)
  log "linked $linked busybox applets that no Debian package of the rootfs provides"
}

# build_agent_rootfs makes the Debian rootfs of the antrea-agent image (its
# packages: AGENT_ROOTFS_PACKAGES; pkg/lab/registry.go adds our binaries and
# build/images/scripts) and links it as _output/rootfs-antrea-agent.
build_agent_rootfs() {
  debootstrap_rootfs "$AGENT_ROOTFS" "$AGENT_ROOTFS_PACKAGES" customize_agent_rootfs
  ln -sfn "$AGENT_ROOTFS" "$OUT/rootfs-antrea-agent"
}

# customize_agent_rootfs leaves no OVS state in the image: start_ovs makes the
# database (on the node's hostPath), and a system-id baked into the image would
# be every node's.
customize_agent_rootfs() {
  local root=$1
  rm -rf "$root"/etc/openvswitch/* "$root"/var/lib/openvswitch/* "$root"/run/openvswitch/*
}

# build_test_rootfses makes the rootfses of the upstream test images besides
# agnhost that the upstream e2e specs the project runs need.
build_test_rootfses() { build_busybox_rootfs; build_nginx_rootfs; }

# build_nginx_rootfs makes the Debian rootfs of the e2e nginx image
# (registry.k8s.io/e2e-test-images/nginx, upstream's test/images/nginx on
# nginx's Alpine image): Debian's nginx-light, logging to the container's
# stdout and stderr and listening on port 80 of IPv4 (the nginx image adds
# IPv6 only where the pod has it).
NGINX_ROOTFS_PACKAGES=nginx-light
NGINX_ROOTFS_RECIPE=1
NGINX_ROOTFS=$CACHE/rootfs-nginx-$ROOTFS_SUITE-$(printf '%s %s' "$NGINX_ROOTFS_PACKAGES" "$NGINX_ROOTFS_RECIPE" | sha256sum | cut -c1-12)
build_nginx_rootfs() {
  debootstrap_rootfs "$NGINX_ROOTFS" "$NGINX_ROOTFS_PACKAGES" customize_nginx_rootfs
  ln -sfn "$NGINX_ROOTFS" "$OUT/rootfs-nginx"
}

# customize_nginx_rootfs points nginx's logs at stdout and stderr in its
# configuration (debootstrap_rootfs empties /var/log after this; the image
# runs `nginx -e stderr` for the log nginx opens before reading it).
customize_nginx_rootfs() {
  local root=$1
  sed -i -e 's|access_log /var/log/nginx/access.log;|access_log /dev/stdout;|' \
    -e 's|error_log /var/log/nginx/error.log;|error_log stderr;|' "$root/etc/nginx/nginx.conf"
  sed -i '/listen \[::\]:80/d' "$root/etc/nginx/sites-available/default"
}

# build_busybox_rootfs makes the rootfs of the e2e busybox image
# (registry.k8s.io/e2e-test-images/busybox, upstream's test/images/busybox on
# the busybox image): Debian's statically linked busybox at /bin/busybox with
# every applet linked beside it in /bin, as the busybox image has them, and
# the few files of its /etc. Debian's package is extracted, not installed.
BUSYBOX_ROOTFS_RECIPE=1
build_busybox_rootfs() {
  local version dir tmp
  version=$(apt-cache policy busybox-static 2>/dev/null | awk '/Candidate:/{print $2}')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    version=$(apt-cache policy busybox-static | awk '/Candidate:/{print $2}')
  fi
  dir=$CACHE/rootfs-busybox-$(printf '%s %s' "$version" "$BUSYBOX_ROOTFS_RECIPE" | sha256sum | cut -c1-12)
  if [ ! -f "$dir/.complete" ]; then
    log "busybox-static $version into $dir"
    tmp=$(mktemp -d)
    chmod 755 "$tmp" # apt downloads as its _apt user
    (cd "$tmp" && apt-get download -qq "busybox-static=$version" && dpkg-deb -x busybox-static_*.deb deb)
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp/bin" "$dir.tmp/etc" "$dir.tmp/root" "$dir.tmp/home" "$dir.tmp/var/spool/mail" "$dir.tmp/tmp"
    chmod 1777 "$dir.tmp/tmp"
    chmod 700 "$dir.tmp/root"
    install -m 0755 "$tmp/deb/bin/busybox" "$dir.tmp/bin/busybox"
    rm -rf "$tmp"
    local name
    while read -r name; do
      [ "$name" = busybox ] || ln -s busybox "$dir.tmp/bin/$name"
    done < <("$dir.tmp/bin/busybox" --list)
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'daemon:x:1:1:daemon:/usr/sbin:/bin/false' \
      'www-data:x:33:33:www-data:/var/www:/bin/false' 'nobody:x:65534:65534:nobody:/home:/bin/false' >"$dir.tmp/etc/passwd"
    printf '%s\n' 'root:x:0:' 'daemon:x:1:' 'www-data:x:33:' 'nogroup:x:65534:' >"$dir.tmp/etc/group"
    touch "$dir.tmp/.complete"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  fi
  ln -sfn "$dir" "$OUT/rootfs-busybox"
}

# link_kube puts the cached control-plane binaries where the lab and envtest look.
link_kube() {
  local b
  for b in etcd "${KUBE_CMDS[@]}" "${KUBE_TEST_IMAGES[@]}" e2e.test agnhost-localhost.crt agnhost-localhost.key; do
    ln -sfn "$KUBECACHE/$b" "$BIN/$b"
  done
}

link_node_runtime() {
  local b
  for b in containerd ctr containerd-shim-runc-v2 runc crictl; do
    ln -sfn "$NODECACHE/$b" "$BIN/$b"
  done
  ln -sfn "$ROOTFS" "$OUT/rootfs-agnhost"
}

install_cni() {
  go_install_to "$CNIBIN" "github.com/containernetworking/cni/cnitool@$CNI_VERSION"
  local p
  for p in bridge host-local loopback portmap ptp; do
    [ -x "$CNIBIN/$p" ] && continue
    log "go install CNI plugin $p"
    local dir=main
    case $p in host-local) dir=ipam ;; portmap) dir=meta ;; esac
    GOBIN=$CNIBIN go install "github.com/containernetworking/plugins/plugins/$dir/$p@$CNI_PLUGINS_VERSION"
  done
}

install_tools() {
  go_install_to "$TOOLS" "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  go_install_to "$TOOLS" "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
  go_install_to "$TOOLS" "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
  go_install_to "$TOOLS" "github.com/onsi/ginkgo/v2/ginkgo@$GINKGO_VERSION"
}

# install_helm builds the helm CLI (make manifests renders the chart with it;
# the chart's tests lint and render with it), cached like the control plane.
# The link flags are those of helm's Makefile: without them helm calls itself
# "v3.22" and renders for Kubernetes v1.20 instead of the version of the
# client-go it is built with.
HELM_VERSION=v3.22.0
install_helm() {
  local dir=$CACHE/helm-$HELM_VERSION
  if [ ! -x "$dir/helm" ]; then
    log "go install helm $HELM_VERSION (about 2 minutes the first time)"
    local clientgo major minor ld p
    clientgo=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | jq -r .GoMod |
      xargs awk '$1 == "k8s.io/client-go" {print $2}')
    major=$(( $(echo "$clientgo" | cut -d. -f1 | tr -d v) + 1 ))
    minor=$(echo "$clientgo" | cut -d. -f2)
    ld="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    for p in pkg/lint/rules pkg/chartutil; do
      ld="$ld -X helm.sh/helm/v3/$p.k8sVersionMajor=$major -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
    done
    GOBIN=$dir nice go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  fi
  ln -sfn "$dir/helm" "$TOOLS/helm"
}

what=${1:-all}
case $what in
  apt) install_apt ;;
  kube) build_etcd; build_kube; link_kube ;;
  node) build_node_runtime; build_rootfs; link_node_runtime; build_agent_rootfs; build_test_rootfses ;;
  coredns) build_coredns ;;
  rootfs) build_rootfs ;;
  agent-rootfs) build_agent_rootfs ;;
  cni) install_cni ;;
  tools) install_tools ;;
  helm) install_helm ;;
  test-rootfs) build_test_rootfses ;;
  all) install_apt; install_cni; install_tools; install_helm; build_etcd; build_kube; link_kube; build_node_runtime; build_rootfs; link_node_runtime; build_agent_rootfs; build_test_rootfses; build_coredns ;;
  *) echo "usage: $0 [all|apt|kube|node|coredns|rootfs|agent-rootfs|test-rootfs|cni|tools|helm]" >&2; exit 2 ;;
esac
log "ok ($what)"
