# normal-ovs.bash (sourced by hack/bench scripts): the reference a pod-to-pod
# figure is printed beside, measured in the same run: two network namespaces
# on one userspace (netdev) OVS bridge with only the NORMAL flow, what OVS
# does with no pipeline at all.
#
# normal_ovs_mbits SECS prints the iperf3 TCP Mbit/s between them.
# normal_ovs_mbits_cps SECS CPS_BIN prints that and, after a space, the TCP
# connections a second (CPS_BIN is hack/bench/cps, dialling for 3 s).
# Each makes its namespaces, OVS instance and directory under the prefix
# given by the caller's PREFIX and removes them all before returning, also on
# failure.

mbits() { jq -r '.end.sum_received.bits_per_second / 1e6 | floor'; }

normal_ovs_mbits() { _normal_ovs "$1" ""; }
normal_ovs_mbits_cps() { _normal_ovs "$1" "$2"; }

_normal_ovs() {
  local secs=$1 cps=$2 dir pids=() out rc=0
  dir=$(mktemp -d /tmp/normalovs-XXXX)
  (
    set -e
    trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
          ip netns del "$PREFIX-a" 2>/dev/null || true; ip netns del "$PREFIX-b" 2>/dev/null || true; ip netns del "$PREFIX-sw" 2>/dev/null || true
          rm -rf "$dir"' EXIT
    export OVS_RUNDIR=$dir OVS_DBDIR=$dir OVS_LOGDIR=$dir OVS_SYSCONFDIR=$dir
    ip netns add "$PREFIX-sw"; ip netns add "$PREFIX-a"; ip netns add "$PREFIX-b"
    ovsdb-tool create "$dir/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    ovsdb-server "$dir/conf.db" --remote="punix:$dir/db.sock" --pidfile="$dir/db.pid" --unixctl="$dir/db.ctl" >/dev/null 2>&1 &
    pids+=($!)
    sleep 0.5
    ip netns exec "$PREFIX-sw" ovs-vswitchd "unix:$dir/db.sock" --pidfile="$dir/vs.pid" --unixctl="$dir/vs.ctl" >/dev/null 2>&1 &
    pids+=($!)
    ovs-vsctl --db="unix:$dir/db.sock" --timeout=10 add-br br0 -- set bridge br0 datapath_type=netdev
    local i=0 n
    for n in a b; do
      i=$((i + 1))
      ip -n "$PREFIX-$n" link add eth0 type veth peer name "v$n" netns "$PREFIX-sw"
      ip -n "$PREFIX-$n" addr add "192.168.250.$i/24" dev eth0
      ip -n "$PREFIX-$n" link set eth0 up
      ip netns exec "$PREFIX-$n" ethtool -K eth0 tx off >/dev/null
      ip -n "$PREFIX-sw" link set "v$n" up
      ovs-vsctl --db="unix:$dir/db.sock" --timeout=10 add-port br0 "v$n"
    done
    ip netns exec "$PREFIX-b" iperf3 -s -1 >/dev/null 2>&1 &
    pids+=($!)
    sleep 0.5
    local mb
    mb=$(ip netns exec "$PREFIX-a" iperf3 -c 192.168.250.2 -t "$secs" -J | mbits)
    if [[ -z $cps ]]; then
      echo "$mb"
      exit 0
    fi
    ip netns exec "$PREFIX-b" "$cps" serve 192.168.250.2:8080 -for 60s &
    pids+=($!)
    sleep 0.3
    echo "$mb $(ip netns exec "$PREFIX-a" "$cps" dial 192.168.250.2:8080)"
  )
}
