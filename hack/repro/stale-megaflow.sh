#!/usr/bin/env bash
# stale-megaflow.sh: when does OVS stop forwarding after an OpenFlow change
# forbids a flow? A minimal reproducer with plain ovs-ofctl on the userspace
# datapath (issue 17 item 7; the answer is in pkg/agent/dpcache).
#
# Two hosts (netns antrea-repro-a 10.0.0.1, antrea-repro-b 10.0.0.2) wired
# through br0 (datapath_type=netdev) of an ovs-vswitchd in antrea-repro-sw.
# Tables: table 0 sends IP through conntrack to table 1, where a new
# connection from port 1 is committed and output to port 2. a sends UDP
# datagrams from a new socket each (a new conntrack connection each), b
# records what arrives and when it was sent. After 1 s a higher-priority flow
# drops a's new connections. Each run prints how many datagrams sent after
# ovs-ofctl returned still arrived:
#   run 1: as is (the change wakes the revalidators at once);
#   run 2: with the revalidators held by `ovs-appctl revalidator/pause` for
#          300 ms around the change: the cached megaflow forwards new
#          connections against the new table for exactly as long.
# Needs root, ovs-vswitchd and python3. Removes everything it made on exit.
set -euo pipefail
D=$(mktemp -d /tmp/antrea-repro.XXXXXX)
export OVS_RUNDIR=$D OVS_DBDIR=$D OVS_LOGDIR=$D OVS_SYSCONFDIR=$D
NS=(antrea-repro-sw antrea-repro-a antrea-repro-b)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$D"
}
trap cleanup EXIT
for n in "${NS[@]}"; do ip netns add "$n"; done
ip link add a0 netns antrea-repro-a type veth peer name a1 netns antrea-repro-sw
ip link add b0 netns antrea-repro-b type veth peer name b1 netns antrea-repro-sw
mac() { ip -n "$1" -j link show "$2" | python3 -c 'import json,sys;print(json.load(sys.stdin)[0]["address"])'; }
for x in "antrea-repro-a a0 10.0.0.1" "antrea-repro-b b0 10.0.0.2"; do
  set -- $x
  ip -n "$1" addr add "$3/24" dev "$2"; ip -n "$1" link set "$2" up; ip -n "$1" link set lo up
  ip netns exec "$1" ethtool -K "$2" tx off >/dev/null   # netdev datapath: no TX checksum offload
done
for l in a1 b1; do ip -n antrea-repro-sw link set "$l" up arp off; done
ip -n antrea-repro-a neigh add 10.0.0.2 lladdr "$(mac antrea-repro-b b0)" dev a0
ip -n antrea-repro-b neigh add 10.0.0.1 lladdr "$(mac antrea-repro-a a0)" dev b0
ovsdb-tool create "$D/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ip netns exec antrea-repro-sw ovsdb-server "$D/conf.db" --remote="punix:$D/db.sock" --log-file="$D/ovsdb.log" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$D/db.sock" ] && break; sleep 0.1; done
ip netns exec antrea-repro-sw ovs-vswitchd "unix:$D/db.sock" --pidfile="$D/vswitchd.pid" --log-file="$D/vswitchd.log" >/dev/null 2>&1 &
PIDS+=($!)
VS="ovs-vsctl --db=unix:$D/db.sock"
$VS --no-wait init
$VS add-br br0 -- set bridge br0 datapath_type=netdev fail_mode=secure protocols=OpenFlow15 \
  -- add-port br0 a1 -- set interface a1 ofport_request=1 -- add-port br0 b1 -- set interface b1 ofport_request=2
for _ in $(seq 50); do [ -f "$D/vswitchd.pid" ] && [ -S "$D/br0.mgmt" ] && break; sleep 0.1; done
BR=unix:$D/br0.mgmt
CTL=$D/ovs-vswitchd.$(cat "$D/vswitchd.pid").ctl
OF="ovs-ofctl -O OpenFlow15"

cat > "$D/udp.py" <<'PY'
import socket, sys, time
if sys.argv[1] == "recv":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.0.0.2", 9000)); s.settimeout(1.5)
    with open(sys.argv[2], "w") as out:
        try:
            while True:
                d, _ = s.recvfrom(100); out.write(d.decode() + "\n")
        except socket.timeout:
            pass
else:
    end = time.time() + float(sys.argv[2])
    while time.time() < end:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(("%.6f" % time.time()).encode(), ("10.0.0.2", 9000)); s.close()
        time.sleep(0.0002)
PY

run() { # $1: hold the revalidators (seconds, 0 = no)
  $OF del-flows $BR
  $OF add-flow $BR 'table=0,priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=1)'
  $OF add-flow $BR 'table=1,priority=10,ip,ct_state=+new+trk,in_port=1,actions=ct(commit,zone=1),output:2'
  ip netns exec antrea-repro-b python3 "$D/udp.py" recv "$D/recv" & local r=$!
  sleep 0.3
  ip netns exec antrea-repro-a python3 "$D/udp.py" send 2.5 & local s=$!
  sleep 1
  [ "$1" != 0 ] && ovs-appctl -t "$CTL" revalidator/pause
  $OF add-flow $BR 'table=1,priority=100,ct_state=+new+trk,udp,in_port=1,nw_src=10.0.0.1,actions=drop'
  local t1; t1=$(date +%s.%N)
  if [ "$1" != 0 ]; then sleep "$1"; ovs-appctl -t "$CTL" revalidator/resume; fi
  wait $s; wait $r
  python3 - "$t1" "$D/recv" "$1" <<'PY'
import sys
t1 = float(sys.argv[1]); sent = [float(l) for l in open(sys.argv[2])]
late = [x - t1 for x in sent if x > t1]
held = "revalidators held %s s" % sys.argv[3] if sys.argv[3] != "0" else "revalidators free"
print("%-26s received %5d datagrams, %4d of them sent after ovs-ofctl add-flow (drop) returned%s" % (
    held + ":", len(sent), len(late), ", the last %.1f ms after" % (max(late) * 1000) if late else ""))
PY
}
run 0
run 0.3
