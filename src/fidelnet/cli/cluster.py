"""``fidelnet cluster``: one topology over several machines, on Kubernetes.

``apply FILE`` validates a scenario file here and creates (or replaces) its
``Topology``; ``status NAME`` prints the Topology's phase and its Shards;
``delete NAME`` deletes it (the garbage collector and the agents do the rest;
``--wait`` waits until its Shards are gone); ``controller`` and ``agent`` run the
controller (:mod:`fidelnet.cluster.controller`) and a machine's shard agent
(:mod:`fidelnet.cluster.agent`) in the foreground. See docs/cluster.md.
"""

from __future__ import annotations

import json
import os

import click

__all__ = ["cluster"]

_KUBECONFIG = click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The cluster's kubeconfig (a bearer token user). Default: $KUBECONFIG.",
)
_NAMESPACE = click.option("--namespace", "-n", default="default", show_default=True)


@click.group()
def cluster() -> None:
    """One topology over several machines on Kubernetes: `apply`, `status`, `delete`, and
    the `controller` and `agent` processes."""


@cluster.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_KUBECONFIG
@_NAMESPACE
@click.option("--name", help="The Topology's name (default: the scenario's name).")
@click.option(
    "--machine",
    "machines",
    multiple=True,
    metavar="NODE[=CAPACITY]",
    help="A Node to use, with its relative capacity (repeat; default: every Node labelled "
    "fidelnet.dev/machine).",
)
@click.option(
    "--delays",
    metavar="JSON",
    help='One-way delays between machines in seconds, e.g. \'{"m1": {"m2": 0.0002}}\'.',
)
def apply(
    file: str,
    kubeconfig: str,
    namespace: str,
    name: str | None,
    machines: tuple[str, ...],
    delays: str | None,
) -> None:
    """Validate scenario FILE and create or replace its Topology."""
    import yaml

    from fidelnet.cluster import objects
    from fidelnet.cluster.kube import Kube, path
    from fidelnet.scenario import load

    scenario = load(file)  # refuses an invalid file here, before the cluster sees it
    with open(file, encoding="utf-8") as f:
        body = yaml.safe_load(f)
    if delays is not None:
        json.loads(delays)  # a JSONDecodeError is a usage error, raised before any request
    topo_name = name or scenario.name or os.path.splitext(os.path.basename(file))[0]
    spec: dict[str, object] = {"scenario": body}
    if machines:
        spec["machines"] = [_machine(m) for m in machines]
    obj = {
        "apiVersion": objects.API,
        "kind": "Topology",
        "metadata": {
            "name": topo_name,
            "namespace": namespace,
            **({"annotations": {objects.DELAYS_KEY: delays}} if delays else {}),
        },
        "spec": spec,
    }
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.apply(path(objects.API, "topologies", namespace=namespace), obj)
    click.echo(f"topology {topo_name} applied")


def _machine(text: str) -> dict[str, object]:
    name, _, capacity = text.partition("=")
    out: dict[str, object] = {"name": name}
    if capacity:
        try:
            out["capacity"] = float(capacity)
        except ValueError:
            raise click.BadParameter(f"{text}: capacity is not a number") from None
    return out


@cluster.command()
@click.argument("name")
@_KUBECONFIG
@_NAMESPACE
def status(name: str, kubeconfig: str, namespace: str) -> None:
    """Print Topology NAME's phase and message, and each of its Shards."""
    from fidelnet.cluster import objects
    from fidelnet.cluster.kube import Kube, path

    kube = Kube.from_kubeconfig(kubeconfig)
    topo = kube.get(path(objects.API, "topologies", name, namespace=namespace))
    st = topo.get("status") or {}
    click.echo(
        f"topology {name}: {st.get('phase', 'Pending')}, "
        f"{st.get('shardsReady', 0)}/{st.get('shards', 0)} shards ready"
    )
    if st.get("message"):
        click.echo(f"  {st['message']}")
    shards = kube.get(
        path(objects.API, "shards", namespace=namespace),
        labelSelector=f"{objects.TOPOLOGY_LABEL}={name}",
    )
    for shard in shards.get("items", []):
        sst = shard.get("status") or {}
        click.echo(
            f"  shard {shard['metadata']['name']} on {shard['spec']['machine']}: "
            f"{sst.get('phase', 'Pending')}"
            + (f", run {sst['runId']}" if sst.get("runId") else "")
            + (f", nodes {', '.join(sst['nodes'])}" if sst.get("nodes") else "")
        )


@cluster.command()
@click.argument("name")
@_KUBECONFIG
@_NAMESPACE
@click.option("--wait", is_flag=True, help="Wait until its Shards are gone (torn down).")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds --wait waits.")
def delete(name: str, kubeconfig: str, namespace: str, wait: bool, timeout: float) -> None:
    """Delete Topology NAME; its Shards and Pods follow once their agents tore them down."""
    from fidelnet.cluster import objects
    from fidelnet.cluster.kube import Kube, path, poll

    kube = Kube.from_kubeconfig(kubeconfig)
    kube.delete(
        path(objects.API, "topologies", name, namespace=namespace), propagation="Background"
    )
    click.echo(f"topology {name} deleted")
    if not wait:
        return
    url = path(objects.API, "shards", namespace=namespace)

    def gone() -> tuple[bool | None, str]:
        items = kube.get(url, labelSelector=f"{objects.TOPOLOGY_LABEL}={name}")["items"]
        return (True if not items else None), f"{len(items)} shards left"

    poll(gone, what=f"shards of topology {name} gone", timeout=timeout, interval=0.5)
    click.echo(f"topology {name}: every shard torn down")


@cluster.command()
@_KUBECONFIG
@_NAMESPACE
@click.option("--interval", default=0.5, show_default=True, help="Seconds between rounds.")
def controller(kubeconfig: str, namespace: str, interval: float) -> None:
    """Run the controller (Topologies to Shards and Pods) in the foreground."""
    from fidelnet.cluster.controller import main

    main(["--kubeconfig", kubeconfig, "--namespace", namespace, "--interval", str(interval)])


@cluster.command()
@_KUBECONFIG
@_NAMESPACE
@click.option("--machine", required=True, help="The Node this agent runs the Shards of.")
@click.option("--interval", default=0.5, show_default=True, help="Seconds between rounds.")
@click.option("--lease-seconds", default=10, show_default=True, help="The Lease's duration.")
@click.option(
    "--wire-address",
    default=None,
    help="This machine's address the other machines reach (cut links' UDP); "
    "without it, cut links wait.",
)
@click.option(
    "--wire-netns",
    default=None,
    help="The network namespace (a path) cut links' sockets live in (default: the agent's).",
)
def agent(
    kubeconfig: str,
    namespace: str,
    machine: str,
    interval: float,
    lease_seconds: int,
    wire_address: str | None,
    wire_netns: str | None,
) -> None:
    """Run a machine's shard agent in the foreground (as root)."""
    from fidelnet.cluster.agent import run_agent

    run_agent(kubeconfig, machine, namespace, interval, lease_seconds, wire_address, wire_netns)
