# Sourced, not run: network-namespace "hosts" joined to this namespace by veth pairs (iproute2
# only), for the two-host tests and benches. Needs root.
#
#   netns_host NAME HERE THERE   namespace NAME; HERE/30 on this side, THERE/30 inside, links up
#   netns_remove NAME...         the namespaces and their links, ignoring what is already gone

netns_host() {
    local name=$1 here=$2 there=$3
    ip netns add "$name"
    ip link add "${name}0" type veth peer name "${name}1"
    ip link set "${name}1" netns "$name"
    ip addr add "$here/30" dev "${name}0"
    ip link set "${name}0" up
    ip netns exec "$name" ip addr add "$there/30" dev "${name}1"
    ip netns exec "$name" ip link set "${name}1" up
    ip netns exec "$name" ip link set lo up
}

netns_remove() {
    local name
    for name in "$@"; do
        ip netns del "$name" 2>/dev/null || true
        ip link del "${name}0" 2>/dev/null || true
    done
}
