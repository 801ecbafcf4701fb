#!/usr/bin/env bash
# Two machines on one host: makes two network namespaces joined by a veth pair and runs a dsinfer
# command as a torchrun-style world of 2 x RANKS_PER_HOST ranks (ranks 0..k-1 in the first
# namespace, k..2k-1 in the second), every rank pointed at MASTER_ADDR = the first namespace's
# address and at its own veth through DSINFER_GLOO_IFACE (so gloo runs over the veth, as between
# two machines).
#
#   tests/two_host.sh DSINFER_BIN ARGS...      e.g. tests/two_host.sh build/dsinfer eval --ckpt-path ...
#
# Environment: RANKS_PER_HOST (default 2), TWO_HOST_LOGS (a directory for rankN.out/.err; default
# a temporary one), TWO_HOST_TIMEOUT (seconds per rank, default 300), LAUNCHER=torchrun (each
# namespace runs `torchrun --no_python --nnodes 2 --node_rank i ...` instead of starting its ranks
# itself: the README's multi-machine torchrun command), LAUNCHER=mpirun (mpirun in the first
# namespace with a hostfile of both, its daemon in the second started by tests/netns_rsh.sh as an
# ssh stand-in: the README's mpirun-with-a-hostfile command; TWO_HOST_MPI_ARGS adds options).
# TWO_HOST_DELAY_US (microseconds, one way): instead of a veth pair, a TUN device in each
# namespace joined by build/net_delay (bench/net_delay.cpp; NET_DELAY overrides the path), which
# delays every packet (this kernel has no netem). TWO_HOST_RATE (e.g. 25gbit): an htb rate limit
# on both ends. TWO_HOST_MTU (default 65000 with the relay: its cost is per packet, and a real NIC's
# segmentation offloads move 64 KB at a time too).
# Rank 0's stdout is copied to this script's stdout. Exit status: 0 when every rank succeeded,
# 77 (skipped) when not root or network namespaces are not permitted here, 1 otherwise (every
# rank's stderr is printed). Namespaces and processes are removed on every exit path.
set -u

SKIP=77
skip() {
  echo "SKIP: $*" >&2
  exit $SKIP
}

if [ $# -lt 2 ]; then
  echo "usage: $0 DSINFER_BIN ARGS..." >&2
  exit 2
fi
bin=$(readlink -f "$1")
shift
per_host=${RANKS_PER_HOST:-2}
world=$((2 * per_host))
rank_timeout=${TWO_HOST_TIMEOUT:-300}
launcher=${LAUNCHER:-direct}

[ "$(id -u)" = 0 ] || skip "two-namespace test needs root (ip netns); run as root to test gloo across 'machines'"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) not installed (apt-get install iproute2)"
if [ "$launcher" = torchrun ]; then
  command -v torchrun >/dev/null 2>&1 || skip "torchrun not installed (apt-get install python3-torch)"
fi
if [ "$launcher" = mpirun ]; then
  command -v mpirun >/dev/null 2>&1 || skip "mpirun not installed (scripts/install-deps.sh)"
  command -v unshare >/dev/null 2>&1 || skip "unshare (util-linux) not installed"
fi
[ -x "$bin" ] || { echo "error: $bin is not an executable" >&2; exit 1; }

ns_a=dsinfer-a-$$
ns_b=dsinfer-b-$$
addr_a=10.231.77.1
addr_b=10.231.77.2
if_a=veth-ds-a
if_b=veth-ds-b
port=29500
logs=${TWO_HOST_LOGS:-}
own_logs=0
if [ -z "$logs" ]; then
  logs=$(mktemp -d)
  own_logs=1
fi
mkdir -p "$logs"
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  if [ -n "$relay_pid" ]; then
    kill -TERM "$relay_pid" 2>/dev/null
    # it stops within its 0.2 s idle wake-up; a relay that does not is killed, not waited for
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$relay_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$relay_pid" 2>/dev/null
    wait "$relay_pid" 2>/dev/null
    [ -n "${TWO_HOST_RELAY_REPORT:-}" ] && cat "$logs/net_delay.err" >&2
  fi
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  [ $own_logs = 1 ] && rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT
# ended from outside (a test's timeout): say what was still running, as a failure would
trap 'echo "two_host: terminated while waiting for ${running_names:-nothing}" >&2; exit 143' TERM

delay_us=${TWO_HOST_DELAY_US:-}
rate=${TWO_HOST_RATE:-}
relay_pid=""
if [ -n "$delay_us" ]; then
  net_delay=${NET_DELAY:-$(dirname "$0")/../build/net_delay}
  [ -x "$net_delay" ] || { echo "error: TWO_HOST_DELAY_US needs the relay at $net_delay (scripts/build.sh)" >&2; exit 1; }
  if_a=tun-ds-a
  if_b=tun-ds-b
fi
mtu=${TWO_HOST_MTU:-$([ -n "$delay_us" ] && echo 65000)}

# Setup; a failure here means this container may not make namespaces or veths: skip.
setup() {
  ip netns add "$ns_a" && ip netns add "$ns_b" || return 1
  if [ -n "$delay_us" ]; then
    # the relay makes the devices, says "ready", then relays until the cleanup stops it
    coproc RELAY { exec "$net_delay" --ns "$ns_a" --ns "$ns_b" --dev "$if_a" --dev "$if_b" --delay-us "$delay_us" \
      2>"$logs/net_delay.err"; }
    relay_pid=$RELAY_PID
    local line=""
    read -r -t 10 line <&"${RELAY[0]}" || true
    [ "$line" = ready ] || { cat "$logs/net_delay.err"; return 1; }
  else
    ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" netns "$ns_b" || return 1
  fi
  ip -n "$ns_a" addr add "$addr_a/24" dev "$if_a" &&
    ip -n "$ns_b" addr add "$addr_b/24" dev "$if_b" &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set "$if_a" ${mtu:+mtu $mtu} up && ip -n "$ns_b" link set "$if_b" ${mtu:+mtu $mtu} up || return 1
  if [ -n "$rate" ]; then
    local ns dev
    for ns in "$ns_a" "$ns_b"; do
      dev=$([ "$ns" = "$ns_a" ] && echo "$if_a" || echo "$if_b")
      tc -n "$ns" qdisc add dev "$dev" root handle 1: htb default 1 r2q 1000 &&
        tc -n "$ns" class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" burst 256k cburst 256k ||
        return 1
    done
  fi
}
if ! setup 2>"$logs/setup.err"; then
  err=$(cat "$logs/setup.err")
  skip "network namespaces, veth pairs or TUN devices are not permitted here (${err//$'\n'/; })"
fi
echo "two_host: namespaces $ns_a ($addr_a on $if_a) and $ns_b ($addr_b on $if_b), $world ranks via $launcher${delay_us:+, one-way delay $delay_us us (net_delay relay)}${rate:+, rate $rate}" >&2
# TWO_HOST_PING=N: N pings from the first namespace to the second first (the round trip the
# delay gives), printed on stderr
if [ -n "${TWO_HOST_PING:-}" ]; then
  ip netns exec "$ns_a" ping -q -c "$TWO_HOST_PING" -i 0.01 -s 56 "$addr_b" 2>&1 | tail -1 | sed 's/^/two_host: ping: /' >&2
fi

# host h (0 or 1): its namespace and interface
ns_of() { if [ "$1" = 0 ]; then echo "$ns_a"; else echo "$ns_b"; fi; }
if_of() { if [ "$1" = 0 ]; then echo "$if_a"; else echo "$if_b"; fi; }

names=()  # what each pid is, for messages
if [ "$launcher" = mpirun ]; then
  # mpirun in the first namespace (its own host name, as netns_rsh.sh gives the second), ranks
  # 0..k-1 there, its daemon for the second namespace started through tests/netns_rsh.sh; ranks
  # talk TCP over the emulated link between machines and shared memory within one (vader). The
  # "machines" share this host's CPUs, so a waiting rank yields its core instead of spinning (at
  # 4 ranks on 2 vCPUs spinning halved decode: 4.4 against 7.6 tok/s on the slice)
  printf '%s slots=%s\n%s slots=%s\n' $addr_a "$per_host" $addr_b "$per_host" >"$logs/hostfile"
  subnet=${addr_a%.*}.0/24
  ip netns exec "$ns_a" unshare --uts env TWO_HOST_NETNS="$addr_a=$ns_a $addr_b=$ns_b" \
    sh -c 'hostname "$0" && exec "$@"' "$ns_a" \
    timeout -k 10 "$rank_timeout" mpirun --allow-run-as-root --hostfile "$logs/hostfile" -n $world --map-by slot --bind-to none \
    --mca plm_rsh_agent "$(readlink -f "$(dirname "$0")")/netns_rsh.sh" --mca btl vader,tcp,self \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" --mca mpi_yield_when_idle 1 ${TWO_HOST_MPI_ARGS:-} \
    "$bin" --threads 1 "$@" </dev/null >"$logs/rank0.out" 2>"$logs/mpirun.err" &
  pids+=($!)
  names+=("mpirun")
elif [ "$launcher" = torchrun ]; then
  for host in 0 1; do
    # torchrun's agent store holds MASTER_PORT; dsinfer's store goes to MASTER_PORT+1
    ip netns exec "$(ns_of $host)" env DSINFER_GLOO_IFACE="$(if_of $host)" \
      timeout -k 10 "$rank_timeout" torchrun --no_python --nnodes 2 --node_rank $host --nproc_per_node "$per_host" \
      --master_addr $addr_a --master_port $port --redirects 1 --tee 1 --log_dir "$logs/torchrun$host" \
      "$bin" --threads 1 "$@" </dev/null >"$logs/host$host.out" 2>"$logs/host$host.err" &
    pids+=($!)
    names+=("torchrun on host $host")
  done
else
  for ((rank = 0; rank < world; ++rank)); do
    host=$((rank / per_host))
    ip netns exec "$(ns_of $host)" env WORLD_SIZE=$world RANK=$rank LOCAL_RANK=$((rank % per_host)) \
      LOCAL_WORLD_SIZE=$per_host MASTER_ADDR=$addr_a MASTER_PORT=$port DSINFER_GLOO_IFACE="$(if_of $host)" \
      timeout -k 10 "$rank_timeout" "$bin" --threads 1 "$@" </dev/null >"$logs/rank$rank.out" 2>"$logs/rank$rank.err" &
    pids+=($!)
    names+=("rank $rank")
  done
fi

# Wait for all; the first failure ends the others (they would end on their own gloo timeout).
# Polled, not `wait -n PIDS`: when several ranks end at once, bash reaps them together and a
# later `wait -n` on the others says "no such job" (seen at 4 ranks timing out together), which
# would lose the failure or wait for ever.
status=0
first_failure=""
running=("${!pids[@]}")  # indices into pids / names
running_names=$(printf '%s, ' "${names[@]}")
running_names=${running_names%, }
while [ "${#running[@]}" -gt 0 ]; do
  sleep 0.1
  still=()
  running_names=""
  for i in "${running[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      still+=("$i")
      running_names+="${running_names:+, }${names[$i]}"
      continue
    fi
    wait "${pids[$i]}"  # a background pid's status is kept after bash reaped it
    rc=$?
    if [ $rc != 0 ] && [ -z "$first_failure" ]; then
      first_failure="${names[$i]} exited with status $rc$([ $rc = 124 ] && echo ' (timed out)')"
      status=1
    fi
  done
  running=("${still[@]}")
  if [ $status != 0 ]; then
    for i in "${running[@]}"; do kill -TERM "${pids[$i]}" 2>/dev/null; done
  fi
done

if [ "$launcher" = torchrun ]; then
  # torchrun's --tee copies rank 0's stdout to host 0's stdout with a "[rank]:" style prefix; the
  # ranks' own files are under the log dir
  out0=$(find "$logs/torchrun0" -path '*/0/stdout.log' 2>/dev/null | head -1)
  [ -n "$out0" ] && cat "$out0"
else
  cat "$logs/rank0.out"
fi
if [ $status != 0 ]; then
  echo "two_host: $first_failure" >&2
  for f in "$logs"/*.err; do
    echo "----- $(basename "$f")" >&2
    cat "$f" >&2
  done
fi
exit $status
