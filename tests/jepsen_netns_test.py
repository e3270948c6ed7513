#!/usr/bin/python3
"""Linearizability under network partitions on the multi-host rig (tests/jepsen/netns_rig.py,
README "Multi-host rig and partitions"): a cluster deployed with `zipg deploy` on four network
namespaces (TLS, 2 replicas per shard, 2 LogStores electing their leader, 3 etcd members), one
~15 s history each with the nemeses partition-one, partition-halves, partition-bridge and
etcd-member-loss, each checked by zipg-check (built with `go build`).

Fails (does not skip) where network namespaces cannot be made: it needs root and iproute2.

Usage: jepsen_netns_test.py PATH/TO/zipg        (exit status 0 if everything passed)"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "jepsen"))

NEMESES = "partition-one,partition-halves,partition-bridge,etcd-member-loss"
SECONDS = 15

if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    import netns_run  # noqa: E402
    sys.exit(netns_run.main(["--zipg", sys.argv[1], "--nemeses", NEMESES,
                             "--seconds", str(SECONDS)]))
