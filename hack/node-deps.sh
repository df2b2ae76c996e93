#!/usr/bin/env bash
# Installs the Debian packages a devnode (internal/devnode, `make e2e`, `go run ./hack/node`) needs
# when any is missing: containerd, runc, the CNI plugins, iptables/nftables, conntrack, iproute2,
# util-linux (nsenter, unshare). Nothing else is downloaded; the node's Kubernetes binaries come
# from hack/control-plane.sh.
set -euo pipefail

need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v nft >/dev/null || need+=(nftables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v ip >/dev/null || need+=(iproute2)
command -v nsenter >/dev/null || need+=(util-linux)
if [[ ${#need[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "node-deps: missing ${need[*]}; run as root to install them" >&2
  exit 2
fi
echo "[node-deps] Installing Debian packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
