#!/usr/bin/env bash
# Open MPI's remote-shell agent for tests/two_host.sh under LAUNCHER=mpirun: where mpirun would
# `ssh HOST COMMAND...` to start its daemon (orted) on another machine, this runs COMMAND in the
# network namespace that plays HOST, so each emulated machine gets its own orted and its ranks
# reach their daemon on their own loopback (Open MPI 4.1's PMIx clients cannot reach a daemon in
# another namespace). The namespace also gets its own UTS namespace and host name, so the
# daemons see two machines, not one.
#
#   netns_rsh.sh HOST COMMAND...     (called by mpirun; --mca plm_rsh_agent)
#
# TWO_HOST_NETNS="ADDR=NAMESPACE ..." maps each host address to its namespace (two_host.sh sets it).
set -u
host=${1:?usage: netns_rsh.sh HOST COMMAND...}
shift
ns=""
for pair in ${TWO_HOST_NETNS:-}; do
  [ "${pair%%=*}" = "$host" ] && ns=${pair#*=}
done
[ -n "$ns" ] || { echo "netns_rsh: no namespace for host $host (TWO_HOST_NETNS='${TWO_HOST_NETNS:-}')" >&2; exit 255; }
# as ssh does: the words of the command are joined and run by a shell
exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && $*"
