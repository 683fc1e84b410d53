#!/usr/bin/env bash
# install.sh puts on this machine everything the project's tests and lab need:
# Debian packages (Open vSwitch, iproute2, ...), a real Kubernetes control plane
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) built
# from the Go module proxy, cnitool and the reference CNI plugins, and the Go
# tools the build uses. It is idempotent: every step is skipped when its output
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

log() { printf '[install] %s\n' "$*" >&2; }

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

apt_packages=(openvswitch-switch openvswitch-common iproute2 iputils-ping ethtool iptables iperf3 openssl protobuf-compiler jq conntrack tcpdump procps)
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

build_kube() {
  local missing=0
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
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
)
GO
  (cd "$d" && go mod tidy >/dev/null 2>&1)
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$KUBECACHE/$b" ] && continue
    log "  go build $b"
    (cd "$d" && go build -trimpath -ldflags "$ld" -o "$KUBECACHE/$b" "k8s.io/kubernetes/cmd/$b")
  done
}

# link_kube puts the cached control-plane binaries where the lab and envtest look.
link_kube() {
  local b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    ln -sfn "$KUBECACHE/$b" "$BIN/$b"
  done
}

install_cni() {
  go_install_to "$CNIBIN" "github.com/containernetworking/cni/cnitool@$CNI_VERSION"
  local p
  for p in bridge host-local loopback portmap; do
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
}

what=${1:-all}
case $what in
  apt) install_apt ;;
  kube) build_etcd; build_kube; link_kube ;;
  cni) install_cni ;;
  tools) install_tools ;;
  all) install_apt; install_cni; install_tools; build_etcd; build_kube; link_kube ;;
  *) echo "usage: $0 [all|apt|kube|cni|tools]" >&2; exit 2 ;;
esac
log "ok ($what)"
